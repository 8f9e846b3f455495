// Package composetest holds the fault test of the cluster deployment
// (docker-compose.yml at the top of the repository): it builds the images
// with deploy/build, starts the stack under a project of its own, drives
// signed deposits and withdrawals through both gateways while it kills the
// ledger stream's leader, pauses a gateway and cuts a NATS node off the
// network, and then checks that every acknowledged write is there exactly
// once and that the balances and the audit agree with the history.
//
// It needs a Docker engine with Compose; without one the test fails. The
// containers' logs are printed (and kept in a temporary directory) when
// the test fails, or always with COMPOSETEST_LOGS=1. The package has no
// code of its own: the test is in its _test.go files.
package composetest
