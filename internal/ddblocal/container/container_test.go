package container

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
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

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/skiplog"
)

// envHelperMode, set to 1, makes the test binary run as the helper program
// ([Main]) instead of running tests: the harness tests point
// $ZAEL_DYNAMODB_CONTAINER_HELPER at the test binary itself. A child is
// also how a test gets a DOCKER_HOST of its own: testcontainers discovers
// the daemon once per process.
const envHelperMode = "ZAEL_DDBLOCAL_CONTAINER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envHelperMode) == "1" {
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

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

// onlyContainer reports whether ZAEL_DYNAMODB_SOURCE=testcontainers (as
// `make test-docker` sets it): then a test that needs Docker fails rather
// than skips without it.
func onlyContainer() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv(ddblocal.EnvSource)), string(ddblocal.SourceContainer))
}

// needDocker returns a provider for the Docker daemon, or skips t when none
// answers. With ZAEL_DYNAMODB_SOURCE=testcontainers a missing daemon fails
// t instead; with ZAEL_DYNAMODB_SOURCE=java, t is skipped without asking.
func needDocker(t *testing.T) *testcontainers.DockerProvider {
	t.Helper()
	if strings.EqualFold(strings.TrimSpace(os.Getenv(ddblocal.EnvSource)), string(ddblocal.SourceJava)) {
		skiplog.Skip(t, "docker", ddblocal.EnvSource+"=java: Docker is not asked")
	}
	p, err := dockerProvider(t.Context(), 5*time.Second)
	if err != nil {
		if onlyContainer() {
			require.NoError(t, err, "%s=testcontainers, but no Docker daemon answers", ddblocal.EnvSource)
		}
		skiplog.Skip(t, "docker", fmt.Sprintf("no Docker daemon answers (`make test-docker` starts none; .ci/run does as root): %v", err))
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// needImage skips t (fails it with ZAEL_DYNAMODB_SOURCE=testcontainers)
// unless ContainerImage is on the Docker host, and so is the image of Ryuk
// when Ryuk is enabled.
func needImage(t *testing.T, p *testcontainers.DockerProvider) {
	t.Helper()
	images := map[string]string{ddblocal.ContainerImage: "run `" + ddblocal.ImageCommand + "`"}
	if !testcontainers.ReadConfig().Config.RyukDisabled {
		//lint:ignore SA1019 the reaper's image is exported only under this name
		images[testcontainers.ReaperDefaultImage] = "or set TESTCONTAINERS_RYUK_DISABLED=true"
	}
	for image, hint := range images {
		if _, err := p.Client().ImageInspect(t.Context(), image); err != nil {
			msg := fmt.Sprintf("%s is not on the Docker host (%s): %v", image, hint, err)
			if onlyContainer() {
				t.Fatal(msg)
			}
			skiplog.Skip(t, "docker image", msg)
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

// checkReason fails t unless err is an *Error with reason, came within
// fallbackBound of begin, and is one line.
func checkReason(t *testing.T, err error, begin time.Time, reason string) {
	t.Helper()
	elapsed := time.Since(begin)
	t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, reason, ce.Reason)
	msg := err.Error()
	assert.Regexp(t, "^"+regexp.QuoteMeta(reason+": "), msg)
	assert.NotContains(t, msg, "\n")
	assert.LessOrEqual(t, elapsed, fallbackBound, "gave up after %v, want within %v", elapsed, fallbackBound)
}

// useHelper makes the harness (ddblocal.Start) run this test binary as its
// helper, with env added to the helper's environment (t.Setenv: the test
// cannot be parallel).
func useHelper(t *testing.T, env map[string]string) {
	t.Helper()
	t.Setenv(ddblocal.EnvContainerHelper, os.Args[0])
	t.Setenv(envHelperMode, "1")
	t.Setenv(ddblocal.EnvEndpoint, "")
	t.Setenv("HOME", t.TempDir()) // no ~/.testcontainers.properties
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// startHarness runs ddblocal.Start as a test package would.
func startHarness(t *testing.T) (*ddblocal.Server, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ddblocal.StartTimeout)
	defer cancel()
	begin := time.Now()
	srv, err := ddblocal.Start(ctx)
	if err == nil {
		t.Cleanup(func() { srv.Close() })
	}
	return srv, time.Since(begin), err
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
// or a daemon that accepts connections but never answers, the harness's
// helper gives up within the health check's bound with reason "no docker";
// with ZAEL_DYNAMODB_SOURCE=testcontainers the harness says so without
// falling back to the jar.
func TestFallbackNoDocker(t *testing.T) {
	for name, host := range map[string]func() string{
		"no socket": func() string { return "unix://" + filepath.Join(t.TempDir(), "docker.sock") },
		"silent":    func() string { return silentDaemon(t) },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(defaultDockerSocket); err == nil && name == "no socket" {
				// Discovery goes on to the default socket when
				// DOCKER_HOST fails, and would find a daemon there.
				t.Skipf("%s exists", defaultDockerSocket)
			}
			useHelper(t, map[string]string{"DOCKER_HOST": host(), ddblocal.EnvSource: "testcontainers"})
			srv, elapsed, err := startHarness(t)
			require.Error(t, err, "got a server: %v", srv)
			assert.ErrorIs(t, err, ddblocal.ErrUnavailable)
			assert.Contains(t, err.Error(), "testcontainers: "+ddblocal.ReasonNoDocker+": ")
			assert.Contains(t, err.Error(), "no fallback to the jar")
			assert.LessOrEqual(t, elapsed, fallbackBound, "gave up after %v, want within %v", elapsed, fallbackBound)
		})
	}
}

// TestStartFallsBackToJar: the harness, with a Docker daemon that does not
// answer, serves the jar and says why in one line.
func TestStartFallsBackToJar(t *testing.T) {
	useHelper(t, map[string]string{"DOCKER_HOST": silentDaemon(t), ddblocal.EnvSource: ""})
	srv, _, err := startHarness(t)
	if errors.Is(err, ddblocal.ErrUnavailable) && !onlyContainer() {
		skiplog.Skip(t, "dynamodb-local", fmt.Sprintf("no jar to fall back to (run `%s`): %v", ddblocal.FetchCommand, err))
	}
	require.NoError(t, err)
	assert.Equal(t, ddblocal.SourceJava, srv.Source())
	assert.Regexp(t, "^"+regexp.QuoteMeta("testcontainers: "+ddblocal.ReasonNoDocker+": "), srv.Fallback())
	assert.NotContains(t, srv.Fallback(), "\n")
}

// TestDockerCheckBounded runs the Docker health check of this process:
// without a daemon it must fail; either way it returns within its bound
// (plus slack).
func TestDockerCheckBounded(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	p, err := dockerProvider(t.Context(), DockerCheckTimeout)
	if err == nil {
		p.Close()
	}
	elapsed := time.Since(begin)
	t.Logf("dockerProvider: err = %v after %v", err, elapsed)
	assert.LessOrEqual(t, elapsed, fallbackBound, "health check took %v, want about %v", elapsed, DockerCheckTimeout)
}

func TestErrorOneLine(t *testing.T) {
	t.Parallel()
	err := &Error{Reason: ddblocal.ReasonPullRefused, Err: errors.New("a\n\n  b  \nc"), Hint: "run x"}
	assert.Equal(t, "pull refused: a; b; c (run x)", err.Error())
	err.Hint = ""
	assert.Equal(t, "pull refused: a; b; c", err.Error())
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
	cfg := DefaultConfig()
	cfg.Image = registry(t, false) + "/zael/missing:1"
	begin := time.Now()
	ctr, err := Start(t.Context(), cfg)
	if err == nil {
		ctr.Terminate()
	}
	checkReason(t, err, begin, ddblocal.ReasonNoImage)
	assert.Contains(t, err.Error(), ddblocal.ImageCommand)
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
			cfg := DefaultConfig()
			cfg.Image = reg + "/zael/missing:1"
			cfg.StallTimeout = time.Second
			begin := time.Now()
			ctr, err := Start(t.Context(), cfg)
			if err == nil {
				ctr.Terminate()
			}
			checkReason(t, err, begin, ddblocal.ReasonPullRefused)
		})
	}
}

// TestFallbackHostUnreachable: when the address testcontainers gives for
// the Docker host does not reach the container (here a documentation-only
// address), the path gives up after ReachTimeout with reason "host
// unreachable", and the container is gone.
func TestFallbackHostUnreachable(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	t.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "203.0.113.1") // TEST-NET-3, routed nowhere
	cfg := DefaultConfig()
	cfg.ReachTimeout = time.Second
	before := containerIDs(t, p)
	begin := time.Now()
	ctr, err := Start(t.Context(), cfg)
	if err == nil {
		ctr.Terminate()
	}
	checkReason(t, err, begin, ddblocal.ReasonHostUnreachable)
	assert.Contains(t, err.Error(), "TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1")
	checkNoNewContainers(t, p, before)
}

// TestFallbackContainerExits: a container whose DynamoDB Local exits at
// once (here on a bad -port) gives reason "container failed" with its exit
// code and last line of output, without waiting for the start timeout.
func TestFallbackContainerExits(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	cfg := DefaultConfig()
	cfg.Args = append(cfg.Args, "-port", "not-a-port")
	before := containerIDs(t, p)
	begin := time.Now()
	ctr, err := Start(t.Context(), cfg)
	if err == nil {
		ctr.Terminate()
	}
	checkReason(t, err, begin, ddblocal.ReasonContainerFailed)
	assert.Contains(t, err.Error(), "exit code")
	checkNoNewContainers(t, p, before)
}

// TestHarnessStartsContainer: the harness, through its helper (this test
// binary), serves DynamoDB Local from a container at 127.0.0.1, labelled
// with the test binary's process ID, and its Close removes the container.
func TestHarnessStartsContainer(t *testing.T) {
	p := needDocker(t)
	needImage(t, p)
	useHelper(t, map[string]string{"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1", ddblocal.EnvSource: "testcontainers"})
	before := containerIDs(t, p)
	srv, _, err := startHarness(t)
	require.NoError(t, err)
	t.Logf("%s at %s in %v", srv.Source(), srv.Endpoint(), srv.StartDuration())
	assert.Equal(t, ddblocal.SourceContainer, srv.Source())
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, srv.Endpoint())
	_, err = ddblocal.NewClient(srv.Endpoint()).ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err, "ListTables")
	assert.Len(t, containerIDs(t, p), len(before)+1)
	require.NoError(t, srv.Close())
	checkNoNewContainers(t, p, before)
}

// containerIDs lists the IDs of the containers, running or not, that this
// process started or had its helper start.
func containerIDs(t *testing.T, p *testcontainers.DockerProvider) map[string]bool {
	t.Helper()
	res, err := p.Client().ContainerList(t.Context(), containerListAll)
	require.NoError(t, err, "list containers")
	ids := map[string]bool{}
	for _, c := range res.Items {
		if c.Labels[PIDLabel] == strconv.Itoa(os.Getpid()) {
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
	var left []string
	for id := range containerIDs(t, p) {
		if !before[id] {
			left = append(left, id[:min(len(id), 12)])
		}
	}
	assert.Empty(t, left, "containers left behind")
}
