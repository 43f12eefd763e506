"""The import direction: the hub's import feed → this cluster's ServiceImports, derived
Services and mirrored EndpointSlices. Three controllers, each declared beside its
reconciler (`member.controller`): `serviceimport`, `derivedservice`, `mirroredslices`, on
`base`, their event → key rules in `keys`; `importer.Importer` builds their informers once
per kind and runs them. Beside them what only importing needs: the feed and its view
(`importfeed`), the desired objects (`importspec`), ownership (`importowners`), `Ready`
(`importready`), metrics (`importmetrics`), the fleet's properties feed (`propertiesfeed`)
and the report of this cluster's namespaces to the hub (`namespacesreport`)."""
