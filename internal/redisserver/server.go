// Package redisserver runs redis-server for tests and benchmarks: one
// standalone server and one three-master Redis Cluster per test binary,
// started on loopback ports when a test first asks for them, and servers of
// a test's own that it may stop and restart. It is a harness, not API.
//
// # Tests
//
// A package whose tests talk to Redis declares
//
//	func TestMain(m *testing.M) { os.Exit(redisserver.Main(m)) }
//
// and calls [Client] or [ClusterClient] in each test that needs a client,
// with [Prefix] for keys of its own (the servers are shared by the tests of
// the package). [Main] stops the servers when the tests are done. When
// redis-server is not installed, the test is skipped with a message naming
// the package to install, except when CI=true or ZAEL_REQUIRE_REDIS=1,
// where it fails instead (`make test` installs the package as root when it
// is missing, and otherwise stops and names it).
//
// Every server runs without persistence, in a temporary directory, and is
// killed with its test binary (Linux parent-death signal) if the binary
// dies before [Main] stops it.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Binaries the harness runs, looked up in $PATH.
const (
	ServerBinary = "redis-server"
	CLIBinary    = "redis-cli"
)

// InstallHint names what provides the binaries on Debian.
const InstallHint = "apt-get install redis-server redis-tools"

// Timeouts of the harness.
const (
	// StartTimeout bounds the start of one server or cluster.
	StartTimeout = time.Minute
	pollInterval = 20 * time.Millisecond
)

// ErrUnavailable is matched by the errors of [Start] and [StartCluster]
// when redis-server is not installed.
var ErrUnavailable = errors.New("redisserver: redis-server unavailable")

// Server is one redis-server process on a loopback port. It is safe for
// concurrent use. The zero value is not usable; call [Start].
type Server struct {
	port    int
	dir     string // working directory (cluster config), removed by Close
	cluster bool
	extra   []string // further configuration directives, as command-line arguments

	mu   sync.Mutex  // guards stop and proc
	stop func()      // kills and reaps the running process; nil when stopped
	proc *os.Process // the running process; nil when stopped
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Start starts a standalone redis-server on a free loopback port and waits
// until it answers PING. extra are further configuration directives as
// command-line arguments, e.g. "--rename-command", "FUNCTION", "".
func Start(ctx context.Context, extra ...string) (*Server, error) {
	return start(ctx, false, extra...)
}

func start(ctx context.Context, cluster bool, extra ...string) (*Server, error) {
	if _, err := exec.LookPath(ServerBinary); err != nil {
		return nil, fmt.Errorf("%w: %s not found (%s)", ErrUnavailable, ServerBinary, InstallHint)
	}
	dir, err := os.MkdirTemp("", "redisserver-")
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 5 {
		port, err := freePort(cluster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := &Server{port: port, dir: dir, cluster: cluster, extra: extra}
		if err := s.launch(ctx); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, errors.Join(errs...)
}

// args returns the command line of the server.
func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--protected-mode", "no", "--loglevel", "warning", "--logfile", "",
	}
	if s.cluster {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-"+strconv.Itoa(s.port)+".conf",
			"--cluster-node-timeout", "2000")
	}
	return append(a, s.extra...)
}

// launch runs the process and waits until it answers.
func (s *Server) launch(ctx context.Context) error {
	out := &tailBuffer{max: 4 << 10}
	cmd := exec.Command(ServerBinary, s.args()...)
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	// Started and reaped by one goroutine locked to its OS thread: the
	// parent-death signal is tied to the thread that forked the child.
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", ServerBinary, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	if err := waitPing(ctx, s.Addr(), exited); err != nil {
		stop()
		return fmt.Errorf("redis-server on port %d: %w: %s", s.port, err, strings.TrimSpace(out.String()))
	}
	s.mu.Lock()
	s.stop, s.proc = stop, cmd.Process
	s.mu.Unlock()
	return nil
}

// Kill stops the process at once (SIGKILL), as a crash would: clients see
// connection errors until [Server.Restart].
func (s *Server) Kill() {
	s.mu.Lock()
	stop := s.stop
	s.stop, s.proc = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Restart kills the process (if it runs) and starts a new one on the same
// port. The new server holds no data and no scripts.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	var err error
	for range 20 { // the port may take a moment to be free again
		if err = s.launch(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Close kills the process and removes its directory.
func (s *Server) Close() error {
	s.Kill()
	return os.RemoveAll(s.dir)
}

// freePort returns a loopback port that was free a moment ago; for a
// cluster node, port+10000 (its cluster bus) was free too.
func freePort(cluster bool) (int, error) {
	if !cluster {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	for range 100 {
		port := 20000 + rand.IntN(20000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return port, nil
	}
	return 0, errors.New("redisserver: no free port pair for a cluster node")
}

// waitPing polls addr with PING until it answers PONG, the process exits or
// ctx ends.
func waitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if ping(addr) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("exited before answering")
		case <-t.C:
		}
	}
}

// ping sends one PING over a new connection.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
