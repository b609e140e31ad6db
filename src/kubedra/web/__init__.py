"""`kubedra ui`: a read-only web dashboard of the cluster, live through the store's watch.

Layers, each its own module: `mirror` keeps every kind current from any Store (list, then
watch); `snapshot` freezes the mirror at one version and serves it back as a read-only Store,
so the scheduler's explanations and the allocator's CEL run on the same state the page shows;
`fleet`, `workloads`, `pending` and `fragmentation` turn a snapshot into the JSON views;
`pages` renders them as whole HTML pages (`html` escapes by construction), so the first
paint has the data; `api` routes URLs to pages and views; `server` is the HTTP server
(pages, JSON API, server-sent events that keep an open page live).
"""
