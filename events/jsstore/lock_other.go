//go:build !unix

package jsstore

import "os"

// LockDir only makes the data directory where file locks are not
// available: it is not protected there.
func LockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return func() {}, nil
}
