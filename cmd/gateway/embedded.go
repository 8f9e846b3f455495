package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/iqdgateway/gateway/events/jsstore"
)

// natsStartTimeoutFlag registers --nats-start-timeout; envErr is a
// GATEWAY_NATS_START_TIMEOUT that is no duration, reported once the flags
// are parsed.
func natsStartTimeoutFlag(fs *flag.FlagSet, v *time.Duration) (envErr error) {
	def := jsstore.DefaultStartTimeout
	if s, ok := os.LookupEnv("GATEWAY_NATS_START_TIMEOUT"); ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			envErr = fmt.Errorf("GATEWAY_NATS_START_TIMEOUT must be a duration such as 5m, not %q", s)
		} else {
			def = d
		}
	}
	fs.DurationVar(v, "nats-start-timeout", def, "how long the embedded server may take to start: it recovers every stream from --data first,\n"+
		"which takes longer the more history --data holds and the busier the host; it says what it waits for every 5s [GATEWAY_NATS_START_TIMEOUT]")
	return envErr
}

// runEmbedded starts the embedded server on o.data and connects to it in
// process; stop shuts the server down.
func runEmbedded(o options, log *slog.Logger) (nc *nats.Conn, stop func(), err error) {
	// Two embedded servers on one directory corrupt it: held until this
	// process ends, however it ends. LockDir makes the directory when it
	// is missing.
	unlock, err := jsstore.LockDir(o.data)
	if err != nil {
		return nil, nil, err
	}
	ns, err := jsstore.RunServer(jsstore.ServerConfig{Dir: o.data, SyncAlways: o.sync == "always" && !storeSyncs(o),
		SyncInterval: serverSyncInterval(o), Listen: o.natsListen, Auth: o.natsAuth,
		StartTimeout: o.natsStartTimeout, Logger: log})
	if errors.Is(err, jsstore.ErrStartTimeout) {
		err = fmt.Errorf("%w; --nats-start-timeout (GATEWAY_NATS_START_TIMEOUT, %s now) gives it longer", err, o.natsStartTimeout)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	stop = func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		unlock()
	}
	authOpts, err := o.natsAuth.Options()
	if err == nil {
		// The server wants the credential from its in-process clients too.
		nc, err = jsstore.ConnectInProcess(ns, "gateway", authOpts...)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	listen := o.natsListen
	if a := ns.Addr(); a != nil && listen != "" {
		// Port 0 asks for a free one: this is the one taken.
		listen = a.String()
	}
	log.Info("embedded JetStream", "dir", o.data, "sync", o.sync, "fsyncByGateway", storeSyncs(o), "natsListen", listen, "natsAuth", o.natsAuth)
	if o.natsListen != "" && o.natsAuth.IsZero() {
		log.Warn("--nats-listen-insecure: the embedded NATS server accepts clients without credentials; "+
			"anyone who reaches the port can read every site's secrets and append events", "natsListen", listen)
	}
	return nc, stop, nil
}
