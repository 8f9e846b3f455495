package jsstore

// SetReadBatch makes Read pull n messages at a time (0: the default), so a
// test can cross from the first fetch to the streaming read with few
// messages.
func SetReadBatch(s *Store, n int) { s.readBatch = n }
