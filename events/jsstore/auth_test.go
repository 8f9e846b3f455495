package jsstore_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// userSeed returns a fresh user nkey seed.
func userSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	return string(seed)
}

func TestAuth_Validate(t *testing.T) {
	seed := userSeed(t)
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	accountSeed, err := account.Seed()
	require.NoError(t, err)
	cases := []struct {
		name    string
		auth    jsstore.Auth
		wantErr string
	}{
		{name: "none", auth: jsstore.Auth{}},
		{name: "user and password", auth: jsstore.Auth{User: "gw", Password: "pw"}},
		{name: "seed", auth: jsstore.Auth{NkeySeed: seed}},
		{name: "seed with newline", auth: jsstore.Auth{NkeySeed: seed + "\n"}},
		{name: "decorated seed", auth: jsstore.Auth{NkeySeed: "-----BEGIN USER NKEY SEED-----\n" + seed + "\n------END USER NKEY SEED------\n"}},
		{name: "user without password", auth: jsstore.Auth{User: "gw"}, wantErr: `user "gw" has no password`},
		{name: "password without user", auth: jsstore.Auth{Password: "pw"}, wantErr: "a password needs a user"},
		{name: "both kinds", auth: jsstore.Auth{User: "gw", Password: "pw", NkeySeed: seed}, wantErr: "not both"},
		{name: "not a seed", auth: jsstore.Auth{NkeySeed: "SUNOTASEED"}, wantErr: "nkey seed"},
		{name: "account seed", auth: jsstore.Auth{NkeySeed: string(accountSeed)}, wantErr: "nkey seed"},
		{name: "bcrypt-shaped password", auth: jsstore.Auth{User: "gw", Password: "$2a$11$abc"}, wantErr: "bcrypt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.auth.Validate()
			if c.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantErr)
			assert.NotContains(t, err.Error(), seed, "a seed must never appear in an error")
		})
	}
}

func TestAuth_String(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	cases := []struct {
		auth jsstore.Auth
		want string
	}{
		{jsstore.Auth{}, "none"},
		{jsstore.Auth{User: "gw", Password: "s3cret"}, "user gw"},
		{jsstore.Auth{NkeySeed: string(seed)}, "nkey " + pub},
		{jsstore.Auth{NkeySeed: "SUBAD"}, "nkey (invalid seed)"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			for _, s := range []string{c.auth.String(), fmt.Sprintf("%v", c.auth), fmt.Sprintf("%+v", c.auth), fmt.Sprintf("%#v", c.auth)} {
				assert.Contains(t, s, c.want)
				assert.NotContains(t, s, "s3cret")
				assert.NotContains(t, s, string(seed))
			}
		})
	}
}

// TestRunServer_auth exposes an embedded server with each kind of
// credential: clients presenting it connect, in process and over TCP;
// clients without it or with another one are refused. (An in-process
// client without credentials is refused too, but nats.go only notices
// after a 10s timeout.)
func TestRunServer_auth(t *testing.T) {
	seed, other := userSeed(t), userSeed(t)
	cases := []struct {
		name  string
		auth  jsstore.Auth
		wrong jsstore.Auth
	}{
		{name: "user and password", auth: jsstore.Auth{User: "gw", Password: "s3cret-pw"}, wrong: jsstore.Auth{User: "gw", Password: "guess"}},
		{name: "nkey", auth: jsstore.Auth{NkeySeed: seed}, wrong: jsstore.Auth{NkeySeed: other}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1", Auth: c.auth})
			srv := ts.NATS()
			good, err := c.auth.Options()
			require.NoError(t, err)
			bad, err := c.wrong.Options()
			require.NoError(t, err)

			nc, err := jsstore.ConnectInProcess(srv, "in-process", good...)
			require.NoError(t, err)
			nc.Close()
			nc, err = jsstore.Dial(srv.ClientURL(), "tcp", good...)
			require.NoError(t, err)
			assert.NoError(t, nc.Flush())
			nc.Close()

			_, err = jsstore.Dial(srv.ClientURL(), "tcp without credentials")
			assert.ErrorIs(t, err, nats.ErrAuthorization)
			_, err = jsstore.Dial(srv.ClientURL(), "tcp with another credential", bad...)
			assert.ErrorIs(t, err, nats.ErrAuthorization)

			// The gateway's own client retries an absent server for ever,
			// but not a refusal.
			nc, err = jsstore.Connect(srv.ClientURL(), "gateway", good...)
			require.NoError(t, err)
			assert.NoError(t, nc.Flush())
			nc.Close()
			_, err = jsstore.Connect(srv.ClientURL(), "gateway with another credential", bad...)
			assert.ErrorIs(t, err, nats.ErrAuthorization)
		})
	}
}

func TestRunServer_badAuth(t *testing.T) {
	_, err := jsstore.RunServer(jsstore.ServerConfig{Dir: t.TempDir(), Auth: jsstore.Auth{User: "gw"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no password")
}
