"""The import direction: the hub's import feed → this cluster's ServiceImports, derived
Services and mirrored EndpointSlices. `importer.Importer` owns its informers, queues and
the three reconcilers (`serviceimport`, `derivedservice`, `mirroredslices`, on `base`)."""
