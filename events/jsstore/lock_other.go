//go:build !unix

package jsstore

// LockDir only makes the data directory where file locks are not
// available: it is not protected there.
func LockDir(dir string) (func(), error) {
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	return func() {}, nil
}
