//go:build unix

package jsstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDirInUse is returned by LockDir for a data directory another process
// holds: two embedded servers on one directory corrupt it.
var ErrDirInUse = errors.New("the data directory is in use by another process")

// lockName is the lock file in a data directory.
const lockName = ".gateway.lock"

// LockDir takes the data directory dir for this process until release (or
// the process's end, however it ends: the lock is the kernel's, on an
// open file), and writes the process id into the lock file for whoever
// finds it taken.
func LockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(owner))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w: %s (process %s); stop it first, or read it through its NATS port (--nats)", ErrDirInUse, dir, pid)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
