package projections

// Models returns the gateway's read models: the set the gateway follows the
// stream with and ledgerctl projections rebuilds and reports on.
func Models() []Model {
	return []Model{}
}
