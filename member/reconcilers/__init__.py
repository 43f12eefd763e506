"""What every reconciler shares: `instrumented` (span, outcome, errors, duration of each
reconcile, and `NotLeading`). The reconcilers themselves live with their direction:
`member.export` and `member.imports`."""
