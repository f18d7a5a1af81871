package ddblocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
)

var containerListAll = client.ContainerListOptions{All: true}

// defaultDockerSocket is where testcontainers looks for a daemon when
// DOCKER_HOST does not answer.
const defaultDockerSocket = "/var/run/docker.sock"

// fallbackBound is a generous bound on how long the testcontainers path may
// take to give up in these tests: the point is seconds, not the minute (or
// more) that testcontainers' own waits and pull retries would take. It is
// far above the harness's own bounds so that a loaded machine does not fail
// the tests.
const fallbackBound = 30 * time.Second

// needDocker returns a provider for the Docker daemon, or skips t when none
// answers. With ZAEL_DYNAMODB_SOURCE=testcontainers a missing daemon fails
// t instead; with ZAEL_DYNAMODB_SOURCE=java, t is skipped without asking.
func needDocker(t *testing.T) *testcontainers.DockerProvider {
	t.Helper()
	only, _ := sourceFromEnv(os.Getenv)
	if only == SourceJava {
		t.Skipf("%s=%s: Docker is not asked", EnvSource, only)
	}
	p, err := dockerProvider(t.Context(), 5*time.Second)
	if err != nil {
		require.NotEqual(t, SourceContainer, only, "%s=%s, but no Docker daemon answers: %v", EnvSource, only, err)
		t.Skipf("no Docker daemon answers: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// needImage skips t (fails it with ZAEL_DYNAMODB_SOURCE=testcontainers)
// unless ContainerImage is on the Docker host, and so is the image of Ryuk
// when Ryuk is enabled.
func needImage(t *testing.T, p *testcontainers.DockerProvider) {
	t.Helper()
	images := map[string]string{ContainerImage: "run `" + ImageCommand + "`"}
	if !testcontainers.ReadConfig().Config.RyukDisabled {
		//lint:ignore SA1019 the reaper's image is exported only under this name
		images[testcontainers.ReaperDefaultImage] = "or set TESTCONTAINERS_RYUK_DISABLED=true"
	}
	for image, hint := range images {
		if _, err := p.Client().ImageInspect(t.Context(), image); err != nil {
			msg := fmt.Sprintf("%s is not on the Docker host (%s): %v", image, hint, err)
			only, _ := sourceFromEnv(os.Getenv)
			require.NotEqual(t, SourceContainer, only)
			t.Skip(msg)
		}
	}
}

// needLocalDaemon skips t unless the Docker daemon runs on this machine
// (a unix socket), so that it can reach a registry on our loopback.
func needLocalDaemon(t *testing.T, p *testcontainers.DockerProvider) {
	t.Helper()
	if h := p.Client().DaemonHost(); !strings.HasPrefix(h, "unix://") {
		t.Skipf("the Docker daemon at %s may not run on this machine", h)
	}
}

// checkReason fails t unless err is a *containerError with reason, came
// within fallbackBound of begin, and is one line.
func checkReason(t *testing.T, err error, begin time.Time, reason string) {
	t.Helper()
	elapsed := time.Since(begin)
	t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
	var ce *containerError
	require.ErrorAs(t, err, &ce, "err = (), want a *containerError")
	assert.Equal(t, reason, ce.reason, "reason = %q, want %q", ce.reason, reason)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, reason+": "), "message %q: want one line starting with %q", msg, reason+": ")
	assert.NotContains(t, msg, "\n", "message %q: want one line starting with %q", msg, reason+": ")
	assert.LessOrEqual(t, elapsed, fallbackBound, "gave up after %v, want within %v", elapsed, fallbackBound)
}

// helperEnv, when set in a child process of these tests, makes
// TestHelperStart run startContainer ("container") or Start ("start") and
// print the outcome as JSON. The child is how a test gets a DOCKER_HOST of
// its own: testcontainers discovers the daemon once per process.
const helperEnv = "ZAEL_DDBLOCAL_TEST_HELPER"

type helperResult struct {
	Source   Source
	Fallback string
	Err      string
	Reason   string
	Elapsed  time.Duration
}

func TestHelperStart(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("runs only as the child process of the fallback tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	begin := time.Now()
	var (
		res helperResult
		srv *Server
		err error
	)
	if mode == "start" {
		srv, err = Start(ctx)
	} else {
		srv, err = startContainer(ctx, defaultContainerConfig())
	}
	res.Elapsed = time.Since(begin)
	if err != nil {
		res.Err = err.Error()
		var ce *containerError
		if errors.As(err, &ce) {
			res.Reason = ce.reason
		}
	} else {
		res.Source, res.Fallback = srv.Source(), srv.Fallback()
		_ = srv.Close()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("helper-result %s\n", b)
}

// runHelper runs TestHelperStart in mode in a child process with env added.
func runHelper(t *testing.T, mode string, env ...string) helperResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperStart$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "HOME="+t.TempDir()) // no ~/.testcontainers.properties
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child\n%s", out)
	m := regexp.MustCompile(`(?m)^helper-result (.*)$`).FindSubmatch(out)
	require.NotNil(t, m, "child printed no result:\n%s", out)
	var res helperResult
	require.NoError(t, json.Unmarshal(m[1], &res), "child result")
	// Not the ErrUnavailable text: .ci/run takes it for a skipped test.
	t.Logf("child: source %q, fallback %q, after %v, err %q", res.Source, res.Fallback, res.Elapsed,
		strings.TrimPrefix(res.Err, ErrUnavailable.Error()+": "))
	return res
}

// silentDaemon returns a DOCKER_HOST that accepts connections and never
// answers.
func silentDaemon(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c) // held open, never answered
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return "tcp://" + l.Addr().String()
}

// TestFallbackNoDocker: with DOCKER_HOST naming a socket nobody listens on,
// or a daemon that accepts connections but never answers, the container
// path gives up within the health check's bound with reason "no docker".
func TestFallbackNoDocker(t *testing.T) {
	t.Parallel()
	for name, host := range map[string]string{
		"no socket": "unix://" + filepath.Join(t.TempDir(), "docker.sock"),
		"silent":    silentDaemon(t),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(defaultDockerSocket); err == nil && name == "no socket" {
				// Discovery goes on to the default socket when
				// DOCKER_HOST fails, and would find a daemon there.
				t.Skipf("%s exists", defaultDockerSocket)
			}
			res := runHelper(t, "container", "DOCKER_HOST="+host)
			assert.Equal(t, ReasonNoDocker, res.Reason, "got %+v, want reason %q", res, ReasonNoDocker)
			assert.Empty(t, res.Source, "got %+v, want reason %q", res, ReasonNoDocker)
			assert.LessOrEqual(t, res.Elapsed, fallbackBound, "gave up after %v, want within %v", res.Elapsed, fallbackBound)
		})
	}
}

// TestStartFallsBackToJar: Start with a Docker daemon that does not answer
// serves the jar, and says why in one line.
func TestStartFallsBackToJar(t *testing.T) {
	t.Parallel()
	res := runHelper(t, "start", "DOCKER_HOST="+silentDaemon(t), EnvSource+"=", EnvEndpoint+"=")
	if res.Err != "" {
		unavailable(t, errors.New(res.Err), os.Getenv)
		return
	}
	assert.Equal(t, SourceJava, res.Source, "source %q, want %q", res.Source, SourceJava)
	require.True(t, strings.HasPrefix(res.Fallback, "testcontainers: "+ReasonNoDocker+": "), "Fallback()")
	assert.NotContains(t, res.Fallback, "\n", "Fallback()")
}

// TestStartOnlyContainer: with ZAEL_DYNAMODB_SOURCE=testcontainers, Start
// does not fall back to the jar.
func TestStartOnlyContainer(t *testing.T) {
	t.Parallel()
	res := runHelper(t, "start", "DOCKER_HOST="+silentDaemon(t), EnvSource+"=testcontainers", EnvEndpoint+"=")
	assert.Empty(t, res.Source, "got %+v, want an unavailable error for %q without fallback", res, ReasonNoDocker)
	assert.Contains(t, res.Err, ErrUnavailable.Error(), "got %+v, want an unavailable error for %q without fallback", res, ReasonNoDocker)
	assert.Contains(t, res.Err, ReasonNoDocker, "got %+v, want an unavailable error for %q without fallback", res, ReasonNoDocker)
	assert.Contains(t, res.Err, "no fallback", "got %+v, want an unavailable error for %q without fallback", res, ReasonNoDocker)
}

func TestSourceFromEnv(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Source{"": "", " java ": SourceJava, "Testcontainers": SourceContainer} {
		got, err := sourceFromEnv(func(string) string { return in })
		require.NoError(t, err, "sourceFromEnv(%q) = %q; want %q", in, got, want)
		assert.Equal(t, want, got, "sourceFromEnv(%q) = %q; want %q", in, got, want)
	}
	got, err := sourceFromEnv(func(string) string { return "docker" })
	assert.Error(t, err, "sourceFromEnv(docker) = %q, want an error", got)
}

func TestContainerErrorOneLine(t *testing.T) {
	t.Parallel()
	err := &containerError{reason: ReasonPullRefused, err: errors.New("a\n\n  b  \nc"), hint: "run x"}
	got, want := err.Error(), "pull refused: a; b; c (run x)"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
	err.hint = ""
	got, want = err.Error(), "pull refused: a; b; c"
	assert.Equal(t, want, got, "Error() without hint = %q, want %q", got, want)
}

// TestMakefileImage: `make docker-image` builds the image the harness runs.
func TestMakefileImage(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := repoRoot(wd)
	require.NoError(t, err)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^DYNAMODB_LOCAL_IMAGE\s*:?=\s*(\S+)\s*$`).FindSubmatch(mk)
	require.NotNil(t, m, "no DYNAMODB_LOCAL_IMAGE in the Makefile")
	assert.Equal(t, ContainerImage, string(m[1]), "Makefile builds %s, the harness runs %s", m[1], ContainerImage)
}

// TestDockerCheckBounded runs the Docker health check of this process:
// without a daemon it must fail; either way it returns within its bound
// (plus slack).
func TestDockerCheckBounded(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	p, err := dockerProvider(t.Context(), dockerCheckTimeout)
	if err == nil {
		p.Close()
	}
	elapsed := time.Since(begin)
	t.Logf("dockerProvider: err = %v after %v", err, elapsed)
	assert.LessOrEqual(t, elapsed, fallbackBound, "health check took %v, want about %v", elapsed, dockerCheckTimeout)
}

// registry is a Docker registry on loopback that knows no image: every
// manifest is unknown. stall makes it accept requests and never answer.
func registry(t *testing.T, stall bool) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall {
			// The daemon may keep the request open after our client gave
			// up: answer nothing until the test ends.
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestFallbackNoImage: an image that its registry does not have gives
// reason "no image" within seconds.
func TestFallbackNoImage(t *testing.T) {
	p := needDocker(t)
	needLocalDaemon(t, p)
	t.Parallel()
	cfg := defaultContainerConfig()
	cfg.image = registry(t, false) + "/zael/missing:1"
	begin := time.Now()
	srv, err := startContainer(t.Context(), cfg)
	if err == nil {
		srv.Close()
	}
	checkReason(t, err, begin, ReasonNoImage)
	assert.Contains(t, err.Error(), ImageCommand, "message does not name %q", ImageCommand)
}

// TestFallbackPullRefused: a registry that refuses connections, or one that
// never answers, gives reason "pull refused" within seconds.
func TestFallbackPullRefused(t *testing.T) {
	p := needDocker(t)
	needLocalDaemon(t, p)
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()
	for name, reg := range map[string]string{
		"refused": closedAddr,
		"stalled": registry(t, true),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultContainerConfig()
			cfg.image = reg + "/zael/missing:1"
			cfg.stallTimeout = time.Second
			begin := time.Now()
			srv, err := startContainer(t.Context(), cfg)
			if err == nil {
				srv.Close()
			}
			checkReason(t, err, begin, ReasonPullRefused)
		})
	}
}

// TestFallbackHostUnreachable: when the address testcontainers gives for
// the Docker host does not reach the container (here a documentation-only
// address), the path gives up after reachTimeout with reason "host
// unreachable", and the container is gone.
func TestFallbackHostUnreachable(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	t.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "203.0.113.1") // TEST-NET-3, routed nowhere
	cfg := defaultContainerConfig()
	cfg.reachTimeout = time.Second
	before := containerIDs(t, p)
	begin := time.Now()
	srv, err := startContainer(t.Context(), cfg)
	if err == nil {
		srv.Close()
	}
	checkReason(t, err, begin, ReasonHostUnreachable)
	assert.Contains(t, err.Error(), "TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1", "message does not name the setting")
	checkNoNewContainers(t, p, before)
}

// TestFallbackContainerExits: a container whose DynamoDB Local exits at
// once (here on a bad -port) gives reason "container failed" with its exit
// code and last line of output, without waiting for the start timeout.
func TestFallbackContainerExits(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	cfg := defaultContainerConfig()
	cfg.args = append(cfg.args, "-port", "not-a-port")
	before := containerIDs(t, p)
	begin := time.Now()
	srv, err := startContainer(t.Context(), cfg)
	if err == nil {
		srv.Close()
	}
	checkReason(t, err, begin, ReasonContainerFailed)
	assert.Contains(t, err.Error(), "exit code", "message does not give the exit code")
	checkNoNewContainers(t, p, before)
}

// TestStartContainer starts DynamoDB Local in a container, talks to it at
// 127.0.0.1 and checks that Close removes the container.
func TestStartContainer(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	t.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	before := containerIDs(t, p)
	srv, err := startContainer(t.Context(), defaultContainerConfig())
	require.NoError(t, err, "startContainer")
	t.Logf("%s at %s in %v", srv.Source(), srv.Endpoint(), srv.StartDuration())
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	assert.Equal(t, SourceContainer, srv.Source(), "source %s at %s, want testcontainers at http://127.0.0.1:port", srv.Source(), srv.Endpoint())
	assert.True(t, strings.HasPrefix(srv.Endpoint(), "http://127.0.0.1:"), "source %s at %s, want testcontainers at http://127.0.0.1:port", srv.Source(), srv.Endpoint())
	_, err = NewClient(srv.Endpoint()).ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err, "ListTables")
	assert.EqualValues(t, 1, len(containerIDs(t, p))-len(before))
	closed = true
	require.NoError(t, srv.Close(), "Close")
	checkNoNewContainers(t, p, before)
}

// containerIDs lists the IDs of the containers, running or not, that this
// process started.
func containerIDs(t *testing.T, p *testcontainers.DockerProvider) map[string]bool {
	t.Helper()
	res, err := p.Client().ContainerList(t.Context(), containerListAll)
	require.NoError(t, err, "list containers")
	ids := map[string]bool{}
	for _, c := range res.Items {
		if c.Labels[pidLabel] == strconv.Itoa(os.Getpid()) {
			ids[c.ID] = true
		}
	}
	return ids
}

// checkNoNewContainers fails t if a container exists that was not in
// before. The tests that call it are not parallel, so no other test of the
// package starts a container meanwhile.
func checkNoNewContainers(t *testing.T, p *testcontainers.DockerProvider, before map[string]bool) {
	t.Helper()
	for id := range containerIDs(t, p) {
		assert.True(t, before[id], "container %.12s left behind", id)
	}
}
