package client_test

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shopMain is a merchant's program in a module of its own.
const shopMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/iqdgateway/gateway/client"
)

func main() {
	c := client.New(os.Getenv("GATEWAY_URL"), os.Getenv("GATEWAY_APP_KEY"), os.Getenv("GATEWAY_SECRET"))
	tx, err := c.Sandbox(context.Background(), client.SandboxApprove, os.Args[1], nil)
	fmt.Println(tx, err)
}
`

// TestClient_fromAnotherModule: a merchant's own module uses the client
// from a checkout exactly as README.md "Go client" says (go mod edit
// -require and -replace, go mod tidy), and builds; a sandbox action given
// as a plain string does not compile.
func TestClient_fromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	checkout, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	gocmd := func(args ...string) (string, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(shopMain), 0o644))
	for _, args := range [][]string{
		{"mod", "init", "example.com/shop"},
		{"mod", "edit", "-require=github.com/iqdgateway/gateway@v0.0.0", "-replace=github.com/iqdgateway/gateway=" + checkout},
		{"mod", "tidy"},
		{"build", "-o", os.DevNull, "."},
	} {
		out, err := gocmd(args...)
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
	}

	bad := strings.Replace(shopMain, "client.SandboxApprove", `"approve"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(bad), 0o644))
	out, err := gocmd("build", "-o", os.DevNull, ".")
	require.Error(t, err, "a plain string compiles: %s", out)
	require.Contains(t, out, `cannot use "approve"`)
}
