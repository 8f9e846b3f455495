// Package natsauth reads the NATS credential flags that the gateway, its
// 'gateway callbacks' subcommand and ledgerctl share, so that every command
// takes the same names and environment variables and builds the same
// jsstore.Auth.
package natsauth

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// Flags are the credential flags as given on the command line or in the
// environment.
type Flags struct {
	user, password, passwordFile, seedFile string
}

// Register adds --nats-user, --nats-password, --nats-password-file and
// --nats-nkey-seed-file to fs, each defaulting to its GATEWAY_NATS_*
// environment variable (the password's is read by Auth, so that -help
// does not print it). role says what the credential is for in the help
// text, e.g. "the --nats server".
func (f *Flags) Register(fs *flag.FlagSet, role string) {
	fs.StringVar(&f.user, "nats-user", os.Getenv("GATEWAY_NATS_USER"),
		"user name for "+role+" (with a password) [GATEWAY_NATS_USER]")
	// Not the variable as the default: -help prints defaults.
	fs.StringVar(&f.password, "nats-password", "",
		"password of --nats-user; a flag's value shows in process lists, prefer the file or the variable [GATEWAY_NATS_PASSWORD]")
	fs.StringVar(&f.passwordFile, "nats-password-file", os.Getenv("GATEWAY_NATS_PASSWORD_FILE"),
		"file holding the password of --nats-user [GATEWAY_NATS_PASSWORD_FILE]")
	fs.StringVar(&f.seedFile, "nats-nkey-seed-file", os.Getenv("GATEWAY_NATS_NKEY_SEED_FILE"),
		"file holding a user nkey seed (SU…, e.g. from 'nk -gen user'), instead of a user and password, for "+role+" [GATEWAY_NATS_NKEY_SEED_FILE]")
}

// Auth reads the files the flags name and returns the credential, checked;
// the zero Auth when none was given.
func (f *Flags) Auth() (jsstore.Auth, error) {
	a := jsstore.Auth{User: f.user, Password: f.password}
	if a.Password == "" {
		a.Password = os.Getenv("GATEWAY_NATS_PASSWORD")
	}
	if f.passwordFile != "" {
		if f.password != "" {
			return jsstore.Auth{}, errors.New("give --nats-password or --nats-password-file, not both")
		}
		p, err := ReadSecret(f.passwordFile)
		if err != nil {
			return jsstore.Auth{}, fmt.Errorf("--nats-password-file: %w", err)
		}
		a.Password = p
	}
	if f.seedFile != "" {
		s, err := ReadSecret(f.seedFile)
		if err != nil {
			return jsstore.Auth{}, fmt.Errorf("--nats-nkey-seed-file: %w", err)
		}
		a.NkeySeed = s
	}
	switch {
	case a.User != "" && a.Password == "":
		return jsstore.Auth{}, errors.New("--nats-user needs --nats-password or --nats-password-file")
	case a.User == "" && a.Password != "":
		return jsstore.Auth{}, errors.New("a NATS password needs --nats-user")
	case a.User != "" && a.NkeySeed != "":
		return jsstore.Auth{}, errors.New("give --nats-user with a password or --nats-nkey-seed-file, not both")
	}
	if err := a.Validate(); err != nil {
		return jsstore.Auth{}, err
	}
	return a, nil
}

// ReadSecret returns a secret file's content without the trailing newline
// that editors and echo leave; an empty secret is an error.
func ReadSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
