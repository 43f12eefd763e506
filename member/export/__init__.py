"""The export direction: this cluster's ServiceExports, their Services and EndpointSlices
→ the hub. Two controllers, each declared beside its reconciler (`member.controller`):
`serviceexport` (the hub's record and the ServiceExport's status) and `sliceexport` (the
Service's slices), sharing one `serviceexport.ExportParts`. Beside them what only
exporting needs: what a ServiceExport sends (`exportspec`), the heartbeat's report of
invalid ones (`invalidexports`) and the mass-withdrawal guard (`withdrawalguard`)."""
