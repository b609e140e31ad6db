"""The `kubedra` command: kubectl's habits over kubedra's store, allocator and simulator."""
