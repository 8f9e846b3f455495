package composetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The services of docker-compose.yml the test knows by name; a NATS
// node's server_name is its service's name (deploy/nats.conf).
func natsServices() []string    { return []string{"nats-1", "nats-2", "nats-3"} }
func gatewayServices() []string { return []string{"gateway-1", "gateway-2"} }
func allServices() []string {
	return []string{"nats-1", "nats-2", "nats-3", "gateway-1", "gateway-2", "callbacks"}
}

// portVar is the variable docker-compose.yml publishes a service's port
// with.
func portVar(svc string) string {
	return strings.ToUpper(strings.ReplaceAll(svc, "-", "_")) + "_PORT"
}

// stack is one running copy of docker-compose.yml under a project name of
// its own, with its own secrets and settings file and host ports, so that
// it can run next to a deployment of the same checkout.
type stack struct {
	t       *testing.T
	root    string
	project string
	envFile string
	// compose is the Compose command: docker compose (v2) or docker-compose.
	compose []string
	// settings are the env file's values, as deploy/build completed it.
	settings map[string]string
	ports    map[string]int
	// ids are the containers by service, read once they exist.
	ids map[string]string
}

// repoRoot is the repository's top directory: where go.mod is, above the
// test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "docker-compose.yml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no docker-compose.yml above the test's directory")
		}
		dir = parent
	}
}

// composeCommand finds Compose: the docker plugin (v2) or the standalone
// docker-compose (v1), as deploy/build does.
func composeCommand() ([]string, error) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}, nil
	}
	return nil, errors.New("neither 'docker compose' nor 'docker-compose' works")
}

// newStack checks that Docker answers, picks free host ports and writes
// them into an env file of the test's own, and builds binaries and images
// with deploy/build, which adds the secrets and the other settings to that
// file as it does to an operator's .env (the public URL from gateway-1's
// port among them). Nothing is started yet.
func newStack(t *testing.T) *stack {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("the Docker engine does not answer (this test needs Docker with Compose): %v\n%s", err, out)
	}
	compose, err := composeCommand()
	if err != nil {
		t.Fatalf("Docker Compose: %v", err)
	}
	removeStale(t)
	s := &stack{t: t, root: repoRoot(t), compose: compose, ports: map[string]int{}, ids: map[string]string{},
		project: fmt.Sprintf("%s%d", projectPrefix, time.Now().UnixNano()%1e9),
		envFile: filepath.Join(t.TempDir(), "test.env")}

	var ports strings.Builder
	for _, svc := range append(natsServices(), gatewayServices()...) {
		s.ports[svc] = freePort(t)
		fmt.Fprintf(&ports, "%s=%d\n", portVar(svc), s.ports[svc])
	}
	if err := os.WriteFile(s.envFile, []byte(ports.String()), 0o600); err != nil {
		t.Fatalf("env file: %v", err)
	}

	start := time.Now()
	cmd := exec.Command("sh", "deploy/build")
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "ENV_FILE="+s.envFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build: %v\n%s", err, out)
	}
	t.Logf("deploy/build (binaries, secrets, images): %s", time.Since(start).Round(time.Millisecond))
	if s.settings, err = readEnvFile(s.envFile); err != nil {
		t.Fatalf("env file: %v", err)
	}
	for _, svc := range append(natsServices(), gatewayServices()...) {
		if got, want := s.settings[portVar(svc)], fmt.Sprint(s.ports[svc]); got != want {
			t.Fatalf("deploy/build changed %s in the env file from %s to %s", portVar(svc), want, got)
		}
	}
	return s
}

// readEnvFile reads KEY=VALUE lines, skipping comments and blank lines.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parseEnv(path, b)
}

// parseEnv reads the KEY=VALUE lines of an env file named path.
func parseEnv(path string, b []byte) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not KEY=VALUE", path, line)
		}
		m[k] = v
	}
	return m, sc.Err()
}

// freePort is a loopback port nobody listens on now. Fixed ports, rather
// than Docker's random ones, survive a container's restart, so the URLs
// the test holds stay valid.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// env is the environment Compose runs in: the test's env file again,
// since a variable set in the environment (someone who sourced a real
// .env) would win over the file. The project is the test's own (-p).
func (s *stack) env() []string {
	env := os.Environ()
	for k, v := range s.settings {
		if k != "COMPOSE_PROJECT_NAME" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// run runs a Compose command on the stack and returns its output.
func (s *stack) run(ctx context.Context, args ...string) (string, error) {
	full := append(append(append([]string{}, s.compose[1:]...),
		"-p", s.project, "-f", filepath.Join(s.root, "docker-compose.yml"), "--env-file", s.envFile), args...)
	cmd := exec.CommandContext(ctx, s.compose[0], full...)
	cmd.Dir = s.root
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", strings.Join(s.compose, " "), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// docker runs a docker command and returns its output.
func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// up starts the stack; its cleanup prints the containers' logs if the
// test failed and always removes containers, network and volumes.
func (s *stack) up() {
	s.t.Helper()
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if s.t.Failed() || os.Getenv("COMPOSETEST_LOGS") != "" {
			s.printLogs(ctx)
		}
		if _, err := s.run(ctx, "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			s.t.Errorf("compose down: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := s.run(ctx, "up", "-d", "--no-build"); err != nil {
		s.t.Fatalf("start the stack: %v", err)
	}
	for _, svc := range allServices() {
		out, err := s.run(ctx, "ps", "-q", svc)
		id := strings.TrimSpace(out)
		if err != nil || id == "" {
			s.t.Fatalf("container of %s: %q %v", svc, out, err)
		}
		s.ids[svc] = id
	}
}

// printLogs logs the end of every container's log and keeps the whole
// logs in a directory that outlives the test, for the request ids the
// failures name.
func (s *stack) printLogs(ctx context.Context) {
	dir, err := os.MkdirTemp("", "composetest-logs-")
	if err != nil {
		s.t.Logf("no directory for the logs: %v", err)
	}
	for _, svc := range allServices() {
		out, err := s.run(ctx, "logs", "--no-color", "--timestamps", svc)
		if err != nil {
			s.t.Logf("logs of %s: %v", svc, err)
			continue
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, svc+".log"), []byte(out), 0o600); err != nil {
				s.t.Logf("keep the logs of %s: %v", svc, err)
			}
		}
		s.t.Logf("---- logs of %s (last 150 lines) ----\n%s", svc, lastLines(out, 150))
	}
	if dir != "" {
		s.t.Logf("the containers' whole logs are in %s", dir)
	}
}

// containerState is what docker inspect says of one container.
type containerState struct {
	status, health      string
	restarts, exitCode  int
	startedAt, finished string
}

// states inspects every container at once.
func (s *stack) states(ctx context.Context) (map[string]containerState, error) {
	args := []string{"inspect"}
	bySvc := map[string]string{}
	for svc, id := range s.ids {
		args = append(args, id)
		bySvc[id] = svc
	}
	out, err := docker(ctx, args...)
	if err != nil {
		return nil, err
	}
	var inspected []struct {
		ID           string `json:"Id"`
		RestartCount int
		State        struct {
			Status     string
			ExitCode   int
			StartedAt  string
			FinishedAt string
			Health     *struct{ Status string }
		}
	}
	if err := json.Unmarshal([]byte(out), &inspected); err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	m := map[string]containerState{}
	for _, c := range inspected {
		st := containerState{status: c.State.Status, health: "none", restarts: c.RestartCount, exitCode: c.State.ExitCode,
			startedAt: c.State.StartedAt, finished: c.State.FinishedAt}
		if c.State.Health != nil {
			st.health = c.State.Health.Status
		}
		m[bySvc[c.ID]] = st
	}
	return m, nil
}

// healthy says whether a container is up and, when it has a health check,
// passing it.
func (c containerState) healthy() bool {
	return c.status == "running" && (c.health == "healthy" || c.health == "none")
}

// network is the Compose network the containers share.
func (s *stack) network(ctx context.Context) (string, error) {
	out, err := docker(ctx, "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", s.ids["nats-1"])
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 1 {
		return "", fmt.Errorf("nats-1 is on networks %q, want one", out)
	}
	return f[0], nil
}

// natsURLs are the cluster's client URLs as published on the host.
func (s *stack) natsURLs() string {
	var urls []string
	for _, svc := range natsServices() {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", s.ports[svc]))
	}
	return strings.Join(urls, ",")
}

// gatewayURL is a gateway's published HTTP address.
func (s *stack) gatewayURL(svc string) string {
	return fmt.Sprintf("http://127.0.0.1:%d", s.ports[svc])
}

// connections says which NATS node each gateway and the dispatcher is
// connected to, read from the nodes' monitoring ports at their container
// addresses. It is for the report only: where the host cannot reach
// container addresses (Docker Desktop), it says so and the test goes on.
func (s *stack) connections(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr := func(svc string) string {
		out, err := docker(ctx, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", s.ids[svc])
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	clients := map[string]string{}
	for _, svc := range append(gatewayServices(), "callbacks") {
		clients[addr(svc)] = svc
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	var found []string
	for _, node := range natsServices() {
		ip := addr(node)
		if ip == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":8222/connz", nil)
		if err != nil {
			continue
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Sprintf("connections unknown (%v)", err)
		}
		var connz struct {
			Connections []struct {
				IP string `json:"ip"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&connz)
		resp.Body.Close()
		if err != nil {
			return fmt.Sprintf("connections unknown (connz of %s: %v)", node, err)
		}
		for _, c := range connz.Connections {
			if svc, ok := clients[c.IP]; ok {
				found = append(found, svc+"→"+node)
			}
		}
	}
	sort.Strings(found)
	return "connections " + strings.Join(found, " ")
}
