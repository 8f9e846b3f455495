//go:build unix

package jsstore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// A data directory is one process's at a time: a second taker is refused
// naming the holder, and it is free again once released or once the
// holder is gone.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	release, err := jsstore.LockDir(dir)
	require.NoError(t, err)
	_, err = jsstore.LockDir(dir)
	require.ErrorIs(t, err, jsstore.ErrDirInUse)
	assert.Contains(t, err.Error(), "process "+strconv.Itoa(os.Getpid()))
	release()
	again, err := jsstore.LockDir(dir)
	require.NoError(t, err)
	again()

	// Held by another process (flock from util-linux, when present).
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Log("no flock command: the other-process case is covered by cmd/ledgerctl's test")
		return
	}
	cmd := exec.Command(flock, "--no-fork", "-x", filepath.Join(dir, ".gateway.lock"), "sleep", "30")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		r, err := jsstore.LockDir(dir)
		if err == nil {
			r()
			return false
		}
		return true
	}, 5e9, 1e7)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	r, err := jsstore.LockDir(dir)
	require.NoError(t, err, "free once the holder is gone")
	r()
}

// A lock file holding anything but a process id is named as an unknown
// holder, not echoed; a data directory that cannot be made is an error,
// not a lock taken somewhere else.
func TestLockDir_errors(t *testing.T) {
	dir := t.TempDir()
	release, err := jsstore.LockDir(dir)
	require.NoError(t, err)
	defer release()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gateway.lock"), []byte("\x1b[2J12 evil\n"), 0o600))
	_, err = jsstore.LockDir(dir)
	require.ErrorIs(t, err, jsstore.ErrDirInUse)
	assert.Contains(t, err.Error(), "(process unknown)")
	assert.NotContains(t, err.Error(), "evil")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = jsstore.LockDir(file)
	require.Error(t, err)
	assert.NotErrorIs(t, err, jsstore.ErrDirInUse)
	_, err = jsstore.LockDir(filepath.Join(file, "data"))
	require.Error(t, err)
}

// A data directory that cannot be made says which one it was to be: an
// empty path, a file, a link to nothing.
func TestLockDir_unusableDirectory(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	broken := filepath.Join(base, "broken")
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere", "deeper"), broken))
	for _, c := range []struct{ dir, want string }{
		{"", "the data directory is an empty path"},
		{file, `data directory "` + file + `" cannot be made or used`},
		{broken, `data directory "` + broken + `" cannot be made or used`},
	} {
		_, err := jsstore.LockDir(c.dir)
		require.Error(t, err, "%q", c.dir)
		assert.Contains(t, err.Error(), c.want)
	}
}
