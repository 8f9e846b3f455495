package jsstore

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Auth is a NATS credential: a user and password, or the seed of a user
// nkey. The ledger stream holds every site's secrets, so a server whose
// client port is reachable must demand one (README "Exposing the embedded
// NATS server").
//
// The same Auth configures what the embedded server accepts
// (ServerConfig.Auth) and what every client presents (Options), so the
// gateway, its callback dispatcher and ledgerctl share one set of flags.
// The zero Auth presents nothing and makes the server accept anyone.
type Auth struct {
	User     string
	Password string
	// NkeySeed is a user nkey's seed ("SU…"), alone or in a decorated
	// creds file. With an nkey the client signs the server's challenge:
	// the seed never crosses the network, the server knows only the
	// public key.
	NkeySeed string
}

// IsZero reports whether a holds no credential.
func (a Auth) IsZero() bool {
	return a == Auth{}
}

// String names the credential without its secret: "user NAME", "nkey
// PUBLICKEY" or "none". Printing an Auth, in a log line or an error, shows
// this and never the password or seed.
func (a Auth) String() string {
	switch {
	case a.NkeySeed != "":
		kp, err := a.keyPair()
		if err != nil {
			return "nkey (invalid seed)"
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return "nkey (invalid seed)"
		}
		return "nkey " + pub
	case a.User != "":
		return "user " + a.User
	}
	return "none"
}

// GoString keeps %#v from printing the secret too.
func (a Auth) GoString() string {
	return "jsstore.Auth{" + a.String() + "}"
}

// Validate checks that a is one whole credential: a user with a password,
// or a user nkey seed, not both.
func (a Auth) Validate() error {
	_, err := a.keyPair()
	return err
}

// bcryptLike is how nats-server recognises a bcrypt hash in its user list:
// a password of that shape would be compared as a hash, never matched.
var bcryptLike = regexp.MustCompile(`^\$2[abxy]\$\d{2}\$`)

// keyPair checks a and returns its nkey, nil for a user and password.
func (a Auth) keyPair() (nkeys.KeyPair, error) {
	hasUser := a.User != "" || a.Password != ""
	switch {
	case hasUser && a.NkeySeed != "":
		return nil, errors.New("nats credentials: give a user and password or an nkey seed, not both")
	case a.User == "" && a.Password != "":
		return nil, errors.New("nats credentials: a password needs a user")
	case a.User != "" && a.Password == "":
		return nil, fmt.Errorf("nats credentials: user %q has no password", a.User)
	case bcryptLike.MatchString(a.Password):
		return nil, errors.New("nats credentials: a password starting like a bcrypt hash ($2a$10$…) is not accepted")
	case a.NkeySeed == "":
		return nil, nil
	}
	kp, err := nkeys.ParseDecoratedUserNKey([]byte(strings.TrimSpace(a.NkeySeed)))
	if err != nil {
		// The seed itself is never part of the message.
		return nil, fmt.Errorf("nats credentials: nkey seed: %w", err)
	}
	return kp, nil
}

// Options are the nats.Connect options that present a; none for the zero
// Auth.
func (a Auth) Options() ([]nats.Option, error) {
	kp, err := a.keyPair()
	switch {
	case err != nil:
		return nil, err
	case kp != nil:
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nats credentials: nkey: %w", err)
		}
		return []nats.Option{nats.Nkey(pub, kp.Sign)}, nil
	case a.User != "":
		return []nats.Option{nats.UserInfo(a.User, a.Password)}, nil
	}
	return nil, nil
}

// configure makes the server accept only clients presenting a (the public
// key of its nkey); the zero Auth leaves it open.
func (a Auth) configure(opts *server.Options) error {
	kp, err := a.keyPair()
	switch {
	case err != nil:
		return err
	case kp != nil:
		pub, err := kp.PublicKey()
		if err != nil {
			return fmt.Errorf("nats credentials: nkey: %w", err)
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	case a.User != "":
		opts.Users = []*server.User{{Username: a.User, Password: a.Password}}
	}
	return nil
}
