"""Tests of kubedra.devcluster: the node images."""
