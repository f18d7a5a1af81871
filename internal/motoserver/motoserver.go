// Package motoserver runs moto's server (python3 -m moto.server) for tests of
// code that calls AWS APIs DynamoDB Local lacks: CloudFormation, Lambda, S3,
// IAM, SQS, STS. One server per test binary, started by the first
// [Endpoint] or [Config] call and stopped by [Main]:
//
//	func TestMain(m *testing.M) { os.Exit(motoserver.Main(m)) }
//
// moto keeps its state per account and region; tests isolate themselves by
// naming their stacks uniquely. When moto cannot be started the tests that
// need it skip, or fail when $CI is "true" or $ZAEL_REQUIRE_MOTO is set.
// $ZAEL_MOTO_ENDPOINT names a running server to use instead.
package motoserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/zaelimiter/limiter/internal/skiplog"
)

// Client settings: moto accepts any credentials; account 123456789012.
const (
	Region          = "us-east-1"
	AccessKeyID     = "testing"
	SecretAccessKey = "testing"
)

// SkipMessage starts the message of every test skipped (or failed) for want
// of moto. .ci/run greps the test log for it.
const SkipMessage = "motoserver: moto unavailable"

// startTimeout bounds the server's start (moto imports many modules).
const startTimeout = 60 * time.Second

// Server is a running moto server.
type Server struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan struct{}
	waitErr  error
}

var pkg struct {
	inMain atomic.Bool
	once   sync.Once
	srv    *Server
	err    error
}

// Main runs a package's tests with one shared moto server (started lazily)
// and returns the exit code.
func Main(m *testing.M) int { return Run(m.Run) }

// Run is [Main] around another runner, for packages that share their
// TestMain with another harness:
//
//	os.Exit(motoserver.Run(func() int { return ddblocal.Main(m) }))
func Run(run func() int) int {
	pkg.inMain.Store(true)
	code := run()
	pkg.once.Do(func() {})
	if pkg.srv != nil {
		pkg.srv.Close()
	}
	return code
}

// required reports whether a missing moto fails the tests.
func required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("ZAEL_REQUIRE_MOTO") != ""
}

// Endpoint returns the shared server's URL, starting it on first use. It
// skips t (fails it when moto is required) when moto cannot be started.
func Endpoint(t testing.TB) string {
	t.Helper()
	if !pkg.inMain.Load() {
		t.Fatal("motoserver: call motoserver.Main from TestMain")
	}
	pkg.once.Do(func() {
		if ep := os.Getenv("ZAEL_MOTO_ENDPOINT"); ep != "" {
			pkg.srv = &Server{endpoint: ep}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		pkg.srv, pkg.err = Start(ctx)
		if pkg.err == nil && testing.Verbose() {
			fmt.Printf("motoserver: moto at %s\n", pkg.srv.endpoint)
		}
	})
	if pkg.err != nil {
		if required() {
			t.Fatalf("%s: %v", SkipMessage, pkg.err)
		}
		skiplog.Skip(t, "moto", fmt.Sprintf("%s: %v (pip install 'moto[server]')", SkipMessage, pkg.err))
	}
	return pkg.srv.endpoint
}

// Config returns an AWS config for the shared server: static credentials,
// region us-east-1, BaseEndpoint set.
func Config(t testing.TB) aws.Config {
	t.Helper()
	ep := Endpoint(t)
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(ep),
	}
}

// Start starts a moto server on a free loopback port and waits until it
// answers.
func Start(ctx context.Context) (*Server, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(python, "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+AccessKeyID, "AWS_SECRET_ACCESS_KEY="+SecretAccessKey,
		"AWS_DEFAULT_REGION="+Region)
	var stderr limitedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}
	s := &Server{cmd: cmd, endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("moto exited: %v: %s", s.waitErr, stderr.String())
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("moto did not answer on %s: %w", s.endpoint, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Endpoint returns the server's URL.
func (s *Server) Endpoint() string { return s.endpoint }

// Close stops the server and waits for it to exit. A server named by
// $ZAEL_MOTO_ENDPOINT is left running.
func (s *Server) Close() {
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-s.done
}

// limitedBuffer keeps the first 8 KiB written to it (moto's start-up errors).
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 8<<10 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
