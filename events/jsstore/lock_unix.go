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

// lockName is the lock file in a data directory.
const lockName = ".gateway.lock"

// LockDir takes the data directory dir for this process until release (or
// the process's end, however it ends: the lock is the kernel's, on an
// open file), and writes the process id into the lock file for whoever
// finds it taken.
func LockDir(dir string) (release func(), err error) {
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner := lockOwner(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (process %s); stop it first, or read it through its NATS port (--nats)", ErrDirInUse, dir, owner)
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

// lockOwner is the process id the lock file f holds, "unknown" for
// anything else: the file is only printed as a number, whatever was
// written into it.
func lockOwner(f *os.File) string {
	b := make([]byte, 20)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return "unknown"
	}
	return strconv.Itoa(pid)
}
