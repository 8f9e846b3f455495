package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gateway/client"
	"gateway/internal/gatewaytest"
)

// cli runs the command with env and returns its exit code and output.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestMerchantCLI(t *testing.T) {
	g := gatewaytest.Start(t)
	g.NewMethod("ZAINCASH", "PHONE")
	site := g.NewSite(nil, 100_000)
	env := map[string]string{"GATEWAY_URL": g.URL, "GATEWAY_APP_KEY": site.AppKey, "GATEWAY_SECRET": site.Secret}

	code, out, stderr := cli(t, env, "", "deposit", "-bank", "ZAINCASH", "-process-id", "m-1", "-amount", "25000",
		"-user-id", "u1", "-user-name", "ali_k", "-name", "Ali Kareem")
	require.Equal(t, 0, code, stderr)
	var d client.Transaction
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	assert.Equal(t, "deposit", d.Type)
	assert.Equal(t, int64(25000), d.Amount)

	code, out, stderr = cli(t, env, "", "status", d.TransactionID)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"processId": "m-1"`)
	code, out, _ = cli(t, env, "", "status", "-process-id", "m-1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, d.TransactionID)

	code, out, stderr = cli(t, env, "", "withdraw", "-bank", "ZAINCASH", "-process-id", "mw-1", "-amount", "10000",
		"-user-id", "u2", "-user-name", "sara", "-name", "Sara", "-account-name", "Sara", "-iban", "07712345678")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"type": "withdrawal"`)

	code, out, _ = cli(t, env, "", "balance")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"available": 90000`)
	code, out, _ = cli(t, env, "", "banks", "-type", "deposit", "-lang", "ar")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"name": "ZAINCASH ar"`)

	// The flags win over the environment.
	code, _, stderr = cli(t, env, "", "-secret", "wrong", "balance")
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "error: 401 invalid_signature")
	assert.Contains(t, stderr, "field:     sign")
	assert.Contains(t, stderr, "requestId: ")
	assert.Contains(t, stderr, "see:       docs/errors.md#invalid_signature")

	code, _, stderr = cli(t, env, "", "deposit", "-bank", "NOPE", "-process-id", "m-2", "-amount", "25000",
		"-user-id", "u3", "-user-name", "x", "-name", "X")
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "unknown_bank")
	assert.Contains(t, stderr, "the enabled deposit methods are ZAINCASH")

	// sign prints what the gateway checks, byte for byte.
	code, out, _ = cli(t, map[string]string{"GATEWAY_SECRET": "demo-secret"}, "", "sign", "processId=order-1001")
	require.Equal(t, 0, code)
	assert.Equal(t, "KN/O3ldlAet0madn3cJXBj2KAW2W5CIelENAAvIYpJM=\n", out)
	code, out, _ = cli(t, map[string]string{"GATEWAY_SECRET": "demo-secret"}, "processId=order-1001", "sign", "-")
	require.Equal(t, 0, code)
	assert.Equal(t, "KN/O3ldlAet0madn3cJXBj2KAW2W5CIelENAAvIYpJM=\n", out)

	usage := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", env, nil, "usage: merchant"},
		{"unknown command", env, []string{"refund"}, `unknown command "refund"`},
		{"no configuration", nil, []string{"balance"}, "-url (GATEWAY_URL), -app-key (GATEWAY_APP_KEY), -secret (GATEWAY_SECRET) missing"},
		{"missing flags", env, []string{"deposit", "-bank", "ZAINCASH"}, "-process-id, -amount, -user-id, -user-name, -name missing"},
		{"status of nothing", env, []string{"status"}, "give a transactionId, or -process-id"},
		{"status of both", env, []string{"status", "-process-id", "x", "y"}, "give a transactionId, or -process-id"},
		{"bad amount", env, []string{"deposit", "-amount", "lots"}, "invalid value"},
		{"sign without secret", nil, []string{"sign", "x"}, "GATEWAY_SECRET) missing"},
		{"sign of nothing", env, []string{"sign"}, "give the body of a POST"},
	}
	for _, u := range usage {
		t.Run(u.name, func(t *testing.T) {
			code, out, stderr := cli(t, u.env, "", u.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, stderr, u.want)
		})
	}
}
