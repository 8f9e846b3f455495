package jsstore

import "errors"

// ErrDirInUse is returned by LockDir for a data directory another process
// holds: two embedded servers on one directory corrupt it.
var ErrDirInUse = errors.New("the data directory is in use by another process")
