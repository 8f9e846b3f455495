package composetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runEnvfile runs deploy/envfile on file, as deploy/build does, and
// returns what it said.
func runEnvfile(t *testing.T, root, file string) string {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(root, "deploy", "envfile"), file)
	cmd.Dir = t.TempDir() // the file's path, not the working directory, says where it is
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ENV_FILE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "deploy/envfile %s:\n%s", file, out)
	return string(out)
}

var hexSecret = regexp.MustCompile(`^[0-9a-f]{48}$`)

// TestEnvfile checks what deploy/build does to the secrets and settings
// file: a missing one is written with every key of deploy/env.example, an
// existing one is given every key it lacks and keeps every line it has,
// and a second run changes nothing.
func TestEnvfile(t *testing.T) {
	root := repoRoot(t)
	example, err := readEnvFile(filepath.Join(root, "deploy", "env.example"))
	require.NoError(t, err)
	// The keys deploy/build has always written, and what the fault test and
	// the README rely on; a trimmed example must not drop them unseen.
	for _, k := range []string{"COMPOSE_PROJECT_NAME", "NATS_CLIENT_USER", "NATS_CLIENT_PASSWORD", "NATS_ROUTE_USER",
		"NATS_ROUTE_PASSWORD", "GATEWAY_ADMIN_TOKEN", "GATEWAY_PUBLIC_URL", "GATEWAY_1_PORT", "GATEWAY_2_PORT",
		"NATS_1_PORT", "NATS_2_PORT", "NATS_3_PORT"} {
		require.Contains(t, example, k, "deploy/env.example")
	}
	// An .env of an earlier deploy/build that had no COMPOSE_PROJECT_NAME.
	older := "# Secrets of docker-compose.yml, made by deploy/build; never commit it.\n" +
		"NATS_CLIENT_USER=gateway\nNATS_CLIENT_PASSWORD=0123456789abcdef0123456789abcdef0123456789abcdef\n" +
		"NATS_ROUTE_USER=route\nNATS_ROUTE_PASSWORD=fedcba9876543210fedcba9876543210fedcba9876543210\n" +
		"GATEWAY_ADMIN_TOKEN=an-operator-token-of-at-least-32-characters\n"

	cases := []struct {
		name    string
		initial *string // nil: no file
		// want are values the result must have beyond the example's.
		want map[string]string
		// missing are keys the result must not have.
		missing []string
		// said must be in what the script printed on the first run.
		said string
	}{
		{name: "no file", want: map[string]string{"GATEWAY_PUBLIC_URL": "http://127.0.0.1:" + example["GATEWAY_1_PORT"]},
			said: "writing"},
		{name: "an older file without COMPOSE_PROJECT_NAME", initial: ptr(older),
			want: map[string]string{"COMPOSE_PROJECT_NAME": "gateway",
				"NATS_CLIENT_PASSWORD": "0123456789abcdef0123456789abcdef0123456789abcdef",
				"GATEWAY_ADMIN_TOKEN":  "an-operator-token-of-at-least-32-characters"},
			said: "added COMPOSE_PROJECT_NAME"},
		{name: "ports of its own and a commented public URL",
			initial: ptr("COMPOSE_PROJECT_NAME=shop\nGATEWAY_1_PORT=9080\nGATEWAY_2_PORT=9081\n# GATEWAY_PUBLIC_URL=https://pay.example\n"),
			want: map[string]string{"COMPOSE_PROJECT_NAME": "shop", "GATEWAY_1_PORT": "9080", "GATEWAY_2_PORT": "9081",
				"GATEWAY_PUBLIC_URL": "http://127.0.0.1:9080"}},
		{name: "no newline after the last line", initial: ptr("COMPOSE_PROJECT_NAME=shop"),
			want: map[string]string{"COMPOSE_PROJECT_NAME": "shop"}},
		{name: "a random gateway port", initial: ptr("GATEWAY_1_PORT=\n"),
			want: map[string]string{"GATEWAY_1_PORT": ""}, missing: []string{"GATEWAY_PUBLIC_URL"},
			said: "not adding GATEWAY_PUBLIC_URL"},
		{name: "a load balancer's URL", initial: ptr("GATEWAY_PUBLIC_URL=https://pay.example\nGATEWAY_1_PORT=9080\n"),
			want: map[string]string{"GATEWAY_PUBLIC_URL": "https://pay.example", "GATEWAY_1_PORT": "9080"}},
		{name: "a public URL on no gateway's port",
			initial: ptr("GATEWAY_PUBLIC_URL=http://127.0.0.1:8080\nGATEWAY_1_PORT=9080\nGATEWAY_2_PORT=9081\n"),
			want:    map[string]string{"GATEWAY_PUBLIC_URL": "http://127.0.0.1:8080"},
			said:    "is on no gateway's port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "test.env")
			if tc.initial != nil {
				require.NoError(t, os.WriteFile(file, []byte(*tc.initial), 0o600))
			}
			said := runEnvfile(t, root, file)
			if tc.said != "" {
				assert.Contains(t, said, tc.said)
			}
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			got := string(b)
			if tc.initial != nil {
				// Every line that was there is there as it was, in place.
				before := *tc.initial
				if !strings.HasSuffix(before, "\n") {
					before += "\n"
				}
				assert.True(t, strings.HasPrefix(got, before), "the file's lines changed:\n%s", got)
			} else {
				fi, err := os.Stat(file)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a new secrets file is its owner's only")
			}
			env, err := readEnvFile(file)
			require.NoError(t, err, got)
			kept := map[string]string{}
			if tc.initial != nil {
				kept, err = parseEnv("initial", []byte(*tc.initial))
				require.NoError(t, err)
			}
			for k, v := range kept {
				assert.Equal(t, v, env[k], "%s is kept as it was", k)
			}
			for k, def := range example {
				if _, ok := tc.want[k]; ok || slices.Contains(tc.missing, k) {
					continue
				}
				if _, ok := kept[k]; ok {
					continue
				}
				v, ok := env[k]
				if !assert.True(t, ok, "%s was not added:\n%s", k, got) {
					continue
				}
				if strings.HasPrefix(def, "change-me") {
					assert.Regexp(t, hexSecret, v, "%s is a new random secret", k)
				} else {
					assert.Equal(t, def, v, "%s has the example's value", k)
				}
			}
			for k, v := range tc.want {
				assert.Equal(t, v, env[k], "%s", k)
			}
			for _, k := range tc.missing {
				assert.NotContains(t, env, k)
			}
			assert.Equal(t, len(env), keyLines(got), "one line per key, each once:\n%s", got)
			if tc.initial == nil {
				assert.NotEqual(t, env["NATS_CLIENT_PASSWORD"], env["NATS_ROUTE_PASSWORD"], "each secret drawn anew")
			}

			// Idempotent: a second run adds nothing and changes nothing.
			said = runEnvfile(t, root, file)
			assert.NotContains(t, said, "added")
			again, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, got, string(again))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// keyLines counts the lines of an env file that set a key.
func keyLines(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}
