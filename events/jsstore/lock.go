package jsstore

import (
	"errors"
	"fmt"
	"os"
)

// ErrDirInUse is returned by LockDir for a data directory another process
// holds: two embedded servers on one directory corrupt it.
var ErrDirInUse = errors.New("the data directory is in use by another process")

// makeDataDir makes the data directory dir where it is missing, naming it
// in the error: "mkdir x: file exists", for a file or a link to nothing
// where the directory should be, does not say what x was to be.
func makeDataDir(dir string) error {
	if dir == "" {
		return errors.New("the data directory is an empty path: give one")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %q cannot be made or used: %w", dir, err)
	}
	return nil
}
