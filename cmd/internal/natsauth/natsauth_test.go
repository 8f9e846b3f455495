package natsauth

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

var envVars = []string{"GATEWAY_NATS_USER", "GATEWAY_NATS_PASSWORD", "GATEWAY_NATS_PASSWORD_FILE", "GATEWAY_NATS_NKEY_SEED_FILE"}

func TestFlags_Auth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	pwFile, crlfFile, emptyFile := write("pw", "file-pw\n"), write("crlf", "crlf pw \r\n"), write("empty", "\n")
	seedFile, junkFile := write("seed", string(seed)+"\n"), write("junk", "not a seed\n")

	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    jsstore.Auth
		wantErr string
	}{
		{name: "none"},
		{name: "flags", args: []string{"--nats-user", "gw", "--nats-password", "pw"}, want: jsstore.Auth{User: "gw", Password: "pw"}},
		{name: "env", env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD": "env-pw"},
			want: jsstore.Auth{User: "gw", Password: "env-pw"}},
		{name: "flag beats env", args: []string{"--nats-password", "flag-pw"}, env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD": "env-pw"},
			want: jsstore.Auth{User: "gw", Password: "flag-pw"}},
		{name: "password file loses its newline", args: []string{"--nats-user", "gw", "--nats-password-file", pwFile},
			want: jsstore.Auth{User: "gw", Password: "file-pw"}},
		{name: "only the line ending is trimmed", args: []string{"--nats-user", "gw", "--nats-password-file", crlfFile},
			want: jsstore.Auth{User: "gw", Password: "crlf pw "}},
		{name: "password file from env", env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD_FILE": pwFile},
			want: jsstore.Auth{User: "gw", Password: "file-pw"}},
		{name: "seed file", args: []string{"--nats-nkey-seed-file", seedFile}, want: jsstore.Auth{NkeySeed: string(seed)}},
		{name: "seed file from env", env: map[string]string{"GATEWAY_NATS_NKEY_SEED_FILE": seedFile}, want: jsstore.Auth{NkeySeed: string(seed)}},
		{name: "user without password", args: []string{"--nats-user", "gw"}, wantErr: "--nats-user needs --nats-password"},
		{name: "password without user", args: []string{"--nats-password", "pw"}, wantErr: "needs --nats-user"},
		{name: "password twice", args: []string{"--nats-user", "gw", "--nats-password", "pw", "--nats-password-file", pwFile},
			wantErr: "not both"},
		{name: "user and seed", args: []string{"--nats-user", "gw", "--nats-password", "pw", "--nats-nkey-seed-file", seedFile},
			wantErr: "not both"},
		{name: "missing file", args: []string{"--nats-user", "gw", "--nats-password-file", filepath.Join(dir, "nope")},
			wantErr: "--nats-password-file"},
		{name: "empty file", args: []string{"--nats-user", "gw", "--nats-password-file", emptyFile}, wantErr: "is empty"},
		{name: "not a seed", args: []string{"--nats-nkey-seed-file", junkFile}, wantErr: "nkey seed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testkit.SetEnv(t, envVars, c.env)
			var f Flags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs, "the test server")
			require.NoError(t, fs.Parse(c.args))
			a, err := f.Auth()
			if c.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, a)
		})
	}
}

// TestFlags_helpHidesThePassword: -help prints each flag's default, and the
// password from the environment must not be one.
func TestFlags_helpHidesThePassword(t *testing.T) {
	t.Setenv("GATEWAY_NATS_USER", "gw")
	t.Setenv("GATEWAY_NATS_PASSWORD", "env-secret-pw")
	var f Flags
	var help bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&help)
	f.Register(fs, "the test server")
	fs.PrintDefaults()
	assert.Contains(t, help.String(), "GATEWAY_NATS_PASSWORD")
	assert.NotContains(t, help.String(), "env-secret-pw")
	require.NoError(t, fs.Parse(nil))
	a, err := f.Auth()
	require.NoError(t, err)
	assert.Equal(t, "env-secret-pw", a.Password)
}
