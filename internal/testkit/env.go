package testkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// SetEnv sets the variables of keys that env holds and unsets the others,
// for the test only: a command's flag and credential tests then see
// exactly the environment they declare, whatever the machine's.
func SetEnv(t *testing.T, keys []string, env map[string]string) {
	t.Helper()
	for _, k := range keys {
		t.Setenv(k, env[k]) // restores the old value when the test ends
		if _, ok := env[k]; !ok {
			os.Unsetenv(k)
		}
	}
}

// SecretFile writes content to a file of its own in dir, readable by its
// owner only, as credentials are stored, and returns its path.
func SecretFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}
