package redisserver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter/internal/skiplog"
)

// EnvRequire names the environment variable that, when true (e.g. 1),
// turns "no redis-server" from a skip into a test failure. CI=true does the
// same.
const EnvRequire = "ZAEL_REQUIRE_REDIS"

// SkipMessage starts the message of every test that the harness skips (or,
// when Redis is required, fails) for want of redis-server. .ci/run greps
// the test log for it.
const SkipMessage = "redisserver: redis-server unavailable"

// ClusterMasters is the number of masters of the package's cluster.
const ClusterMasters = 3

// Runner runs tests and returns an exit code; *testing.M is one.
type Runner interface{ Run() int }

// RunnerFunc adapts a function to [Runner], to nest harnesses:
//
//	os.Exit(redisserver.Main(redisserver.RunnerFunc(func() int { return ddblocal.Main(m) })))
type RunnerFunc func() int

// Run calls f.
func (f RunnerFunc) Run() int { return f() }

// pkg holds the servers of a test binary, started lazily and stopped by
// Main.
var pkg struct {
	inMain atomic.Bool

	mu      sync.Mutex // guards the fields below
	done    bool
	single  *Server
	cluster *Cluster
	errs    map[bool]error // start errors, by cluster
	private []*Server      // servers of single tests not yet closed
}

// Main runs a package's tests and then stops the servers they started,
// and returns the exit code. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(redisserver.Main(m)) }
func Main(m Runner) int {
	pkg.inMain.Store(true)
	widenStoreTimeout()
	code := m.Run()
	pkg.mu.Lock()
	defer pkg.mu.Unlock()
	pkg.done = true
	var closers []interface{ Close() error }
	if pkg.single != nil {
		closers = append(closers, pkg.single)
	}
	if pkg.cluster != nil {
		closers = append(closers, pkg.cluster)
	}
	for _, s := range pkg.private {
		closers = append(closers, s)
	}
	for _, c := range closers {
		if err := c.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "redisserver: stop: %v\n", err)
		}
	}
	return code
}

// checkMain fails t when the binary has no TestMain calling Main.
func checkMain(t testing.TB) {
	t.Helper()
	if !pkg.inMain.Load() {
		t.Fatal("redisserver: the package needs func TestMain(m *testing.M) { os.Exit(redisserver.Main(m)) }")
	}
}

// shared returns the package's standalone server or cluster, starting it on
// first use; it skips or fails t when it cannot be had.
func shared(t testing.TB, cluster bool) (*Server, *Cluster) {
	t.Helper()
	checkMain(t)
	pkg.mu.Lock()
	defer pkg.mu.Unlock()
	if pkg.done {
		t.Fatal("redisserver: Main has already stopped the servers")
	}
	if err := pkg.errs[cluster]; err != nil {
		unavailable(t, err)
		return nil, nil
	}
	if (cluster && pkg.cluster == nil) || (!cluster && pkg.single == nil) {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		begin := time.Now()
		var err error
		what := ""
		if cluster {
			pkg.cluster, err = StartCluster(ctx, ClusterMasters)
			if err == nil {
				what = fmt.Sprintf("cluster of %d masters at %s", ClusterMasters, strings.Join(pkg.cluster.Addrs(), ","))
			}
		} else {
			pkg.single, err = Start(ctx)
			if err == nil {
				what = "server at " + pkg.single.Addr()
			}
		}
		if err != nil {
			if pkg.errs == nil {
				pkg.errs = map[bool]error{}
			}
			pkg.errs[cluster] = err
			unavailable(t, err)
			return nil, nil
		}
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "redisserver: redis-server %s, started in %v\n", what, time.Since(begin).Round(time.Millisecond))
		}
	}
	return pkg.single, pkg.cluster
}

// Addr returns the address of the package's standalone server, starting
// it on first use (see the package doc for the skip and fail rules).
func Addr(t testing.TB) string {
	t.Helper()
	s, _ := shared(t, false)
	return s.Addr()
}

// Client returns a client of the package's standalone server, closed when
// the test ends. Its timeouts are short, so that a dead server fails a call
// in well under a second.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(ClientOptions(Addr(t)))
	t.Cleanup(func() { c.Close() })
	return c
}

// ClientOptions returns the options of the clients this package builds for
// the server at addr.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:         addr,
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		MaxRetries:   -1, // a test sees each error; the store decides what to retry
	}
}

// ClusterAddrs returns the addresses of the masters of the package's
// cluster, starting it on first use.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	_, c := shared(t, true)
	return c.Addrs()
}

// ClusterClient returns a client of the package's cluster, closed when the
// test ends.
func ClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        ClusterAddrs(t),
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		MaxRetries:   -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// Private starts a standalone server for t alone (to stop or restart it,
// or configured by extra: see [Start]), closed when the test ends.
func Private(t testing.TB, extra ...string) *Server {
	t.Helper()
	checkMain(t)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := Start(ctx, extra...)
	if err != nil {
		unavailable(t, err)
		return nil
	}
	pkg.mu.Lock()
	pkg.private = append(pkg.private, s)
	pkg.mu.Unlock()
	t.Cleanup(func() {
		pkg.mu.Lock()
		for i, p := range pkg.private {
			if p == s {
				pkg.private = append(pkg.private[:i], pkg.private[i+1:]...)
				break
			}
		}
		pkg.mu.Unlock()
		s.Close()
	})
	return s
}

// prefixSeq makes Prefix unique within the process; runID across the test
// binaries sharing a server (none today: each binary starts its own).
var (
	prefixSeq atomic.Uint64
	runID     = strconv.FormatUint(uint64(time.Now().UnixNano())&0xffffff, 36)
)

// Prefix returns a key prefix unique to this call, so that tests sharing a
// server never see each other's keys.
func Prefix(t testing.TB) string {
	return "t" + runID + "-" + strconv.FormatUint(prefixSeq.Add(1), 10) + ":"
}

// required reports whether a missing redis-server fails tests instead of
// skipping them: when ZAEL_REQUIRE_REDIS or CI is true.
func required() bool {
	for _, k := range []string{EnvRequire, "CI"} {
		if b, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(k))); err == nil && b {
			return true
		}
	}
	return false
}

// unavailable skips t, or fails it when Redis is required, with a message
// that starts with SkipMessage.
func unavailable(t testing.TB, err error) {
	t.Helper()
	cause := strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
	msg := fmt.Sprintf("%s: %s", SkipMessage, cause)
	if required() {
		t.Fatalf("%s\n(a failure, not a skip: CI=true or %s=1)", msg, EnvRequire)
		return
	}
	skiplog.Skip(t, "redis-server", msg)
}

// WideStoreTimeout is the store timeout of the limiters of a test binary
// whose TestMain calls Main, unless $ZAEL_STORE_TIMEOUT is set: long
// enough that a store on a loaded machine never times out. The tests of
// the bound itself set theirs with limiter.Options.StoreTimeout.
const WideStoreTimeout = "30s"

// widenStoreTimeout sets $ZAEL_STORE_TIMEOUT (the default of limiter.Options.StoreTimeout) to
// WideStoreTimeout when it is unset.
func widenStoreTimeout() {
	if os.Getenv("ZAEL_STORE_TIMEOUT") == "" {
		os.Setenv("ZAEL_STORE_TIMEOUT", WideStoreTimeout)
	}
}
