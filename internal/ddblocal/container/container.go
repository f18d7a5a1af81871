// Package container starts DynamoDB Local in a Docker container through
// testcontainers-go, for the test harness of package ddblocal. It is a
// module of its own, so that testcontainers-go, the Docker client and
// their dependencies stay out of the limiter's module: the harness runs
// this package's program (cmd/ddblocal-container, [Main]) and talks to it
// over a pipe.
//
// The image is [ddblocal.ContainerImage], pulled when the Docker host lacks
// it, or built offline by `make docker-image`. The container runs on the
// daemon's default bridge; when testcontainers names a loopback address
// for the Docker host, its port is published on 127.0.0.1 only. Every
// error of [Start] is an *[Error] whose Reason is one of ddblocal's Reason
// constants.
package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcdynamodb "github.com/testcontainers/testcontainers-go/modules/dynamodb"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// Bounds of the testcontainers path.
const (
	// DockerCheckTimeout bounds the Docker health check, so that a machine
	// without a daemon (or with a DOCKER_HOST that does not answer) falls
	// through to the jar at once.
	DockerCheckTimeout = 500 * time.Millisecond
	// pullStallTimeout gives up the pull of a missing image when the
	// registry reports no progress for this long. An unreachable registry
	// refuses at once; a download that progresses may take minutes.
	pullStallTimeout = 10 * time.Second
	// reachTimeout is how long after DynamoDB Local's first line of output
	// the container's port must have accepted a TCP connection at the
	// Docker host's address: an address the tests cannot reach is given up
	// after it (see waitContainerReady).
	reachTimeout = 5 * time.Second
	// containerStopTimeout is how long a container gets to stop before it
	// is killed, when it is terminated.
	containerStopTimeout = 5 * time.Second
	// containerPort is DynamoDB Local's port inside the container.
	containerPort = "8000/tcp"
	// PIDLabel labels each container with the process ID of the test
	// binary it serves (.ci/run lists the containers left by it).
	PIDLabel = "io.github.zaelimiter.ddblocal.pid"
	// pollInterval is the pause between two readiness probes.
	pollInterval = 200 * time.Millisecond
)

// Error says in one line why the container could not be had: a reason
// (one of ddblocal's Reason constants), the cause, and what to do.
type Error struct {
	Reason string
	Err    error
	Hint   string // may be empty
}

func (e *Error) Error() string {
	s := e.Reason + ": " + ddblocal.OneLine(e.Err.Error())
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Config is what [Start] runs and how long it waits.
type Config struct {
	Image        string
	Args         []string      // after "java -jar DynamoDBLocal.jar"
	StallTimeout time.Duration // see pullStallTimeout
	ReachTimeout time.Duration // see reachTimeout
	OwnerPID     int           // the value of the PIDLabel label
}

// DefaultConfig is the container the harness runs: [ddblocal.ContainerImage]
// in memory, owned by this process.
func DefaultConfig() Config {
	return Config{
		Image:        ddblocal.ContainerImage,
		Args:         []string{"-inMemory", "-sharedDb", "-disableTelemetry"},
		StallTimeout: pullStallTimeout,
		ReachTimeout: reachTimeout,
		OwnerPID:     os.Getpid(),
	}
}

// Container is a running DynamoDB Local container.
type Container struct {
	// Endpoint is its base URL, e.g. http://127.0.0.1:32771.
	Endpoint string
	// Started is how long the start took, until the first answer.
	Started time.Duration

	stop func() error
}

// Terminate stops the container and removes it.
func (c *Container) Terminate() error { return c.stop() }

// dockerProvider returns a testcontainers provider once a Docker daemon
// has answered, within timeout. The first call of a process discovers the
// daemon the way testcontainers-go does (DOCKER_HOST,
// ~/.testcontainers.properties, the default and rootless sockets) and
// testcontainers caches the result; without a daemon this takes a few
// milliseconds.
func dockerProvider(ctx context.Context, timeout time.Duration) (*testcontainers.DockerProvider, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Discovery under our deadline: NewDockerProvider below would run it
	// (once per process) with an unbounded context.
	if _, err := testcontainers.NewDockerClientWithOpts(ctx); err != nil {
		return nil, err
	}
	p, err := testcontainers.NewDockerProvider(
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		// As Run's own provider has it. Without it, DaemonHost would create
		// a network of its own ("reaper_default") to find a gateway in.
		testcontainers.WithDefaultBridgeNetwork(testcontainers.Bridge),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Health(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Start runs cfg.Image on the Docker host's default bridge and waits until
// it answers. [Container.Terminate] stops and removes the container. Every
// error is an *[Error]; none takes more than a few seconds unless an
// image download is making progress or DynamoDB Local itself is slow to
// start.
func Start(ctx context.Context, cfg Config) (*Container, error) {
	begin := time.Now()
	p, err := dockerProvider(ctx, DockerCheckTimeout)
	if err != nil {
		return nil, &Error{Reason: ddblocal.ReasonNoDocker,
			Err: fmt.Errorf("none answers at DOCKER_HOST or the default or rootless sockets: %w", err)}
	}
	defer p.Close()
	if err := ensureImage(ctx, p.Client(), cfg.Image, cfg.StallTimeout, "run `"+ddblocal.ImageCommand+"`"); err != nil {
		return nil, err
	}
	if !testcontainers.ReadConfig().Config.RyukDisabled {
		// Ryuk, the reaper container testcontainers starts first, would be
		// pulled with retries for minutes.
		//lint:ignore SA1019 the reaper's image is exported only under this name
		ryuk := testcontainers.ReaperDefaultImage
		if err := ensureImage(ctx, p.Client(), ryuk, cfg.StallTimeout, "set TESTCONTAINERS_RYUK_DISABLED=true"); err != nil {
			return nil, err
		}
	}
	host, err := p.DaemonHost(ctx)
	if err != nil {
		return nil, &Error{Reason: ddblocal.ReasonContainerFailed, Err: fmt.Errorf("docker host address: %w", err)}
	}
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithCmdArgs(cfg.Args...),
		testcontainers.WithLabels(map[string]string{PIDLabel: strconv.Itoa(cfg.OwnerPID)}),
		// Only the port mapping: reachability and readiness are checked
		// below, within bounds of our own (the module's check waits 60 s
		// on an unreachable host).
		testcontainers.WithWaitStrategy(wait.ForMappedPort(containerPort)),
	}
	if isLoopback(host) {
		// The tests reach the container at the loopback address only; so
		// does no one else.
		host = "127.0.0.1"
		opts = append(opts, testcontainers.WithHostConfigModifier(bindLoopback))
	}
	ctr, err := tcdynamodb.Run(ctx, cfg.Image, opts...)
	stop := func() error {
		if ctr == nil {
			return nil
		}
		return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(containerStopTimeout))
	}
	fail := func(reason string, err error, hint string) (*Container, error) {
		_ = stop()
		return nil, &Error{Reason: reason, Err: err, Hint: hint}
	}
	if err != nil {
		return fail(ddblocal.ReasonContainerFailed, err, "")
	}
	port, err := ctr.MappedPort(ctx, containerPort)
	if err != nil {
		return fail(ddblocal.ReasonContainerFailed, fmt.Errorf("mapped port: %w", err), "")
	}
	addr := net.JoinHostPort(host, port.Port())
	if err := waitContainerReady(ctx, ctr, addr, cfg.ReachTimeout); err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			return fail(ce.Reason, ce.Err, ce.Hint)
		}
		return fail(ddblocal.ReasonContainerFailed, err, "")
	}
	return &Container{Endpoint: "http://" + addr, Started: time.Since(begin), stop: stop}, nil
}

// ensureImage makes sure image is on the Docker host, pulling it when it is
// not. The pull is given up when the registry reports no progress for
// stall. hint says what to do when the image cannot be had.
func ensureImage(ctx context.Context, cli client.APIClient, image string, stall time.Duration, hint string) error {
	_, err := cli.ImageInspect(ctx, image)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return &Error{Reason: ddblocal.ReasonContainerFailed, Err: fmt.Errorf("inspect %s: %w", image, err)}
	}
	if err := pullImage(ctx, cli, image, stall); err != nil {
		reason := ddblocal.ReasonPullRefused
		if cerrdefs.IsNotFound(err) || looksNotFound(err) {
			reason = ddblocal.ReasonNoImage
		}
		return &Error{Reason: reason, Err: fmt.Errorf("%s is not on the Docker host; pull: %w", image, err), Hint: hint}
	}
	return nil
}

// errPullStalled ends a pull that reported no progress for too long.
var errPullStalled = errors.New("no progress")

// pullImage pulls image, giving up when no message arrives for stall.
func pullImage(ctx context.Context, cli client.APIClient, image string, stall time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(stall, func() { cancel(fmt.Errorf("%w for %v", errPullStalled, stall)) })
	defer timer.Stop()
	resp, err := cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return cause
			}
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		timer.Reset(stall)
	}
	return context.Cause(ctx)
}

// looksNotFound reports whether a pull error says that the registry has no
// such image (as opposed to: could not be asked). Registries word it
// differently; the daemon passes their words on.
func looksNotFound(err error) bool {
	s := strings.ToLower(err.Error())
	for _, w := range []string{"manifest unknown", "not found", "does not exist", "name unknown", "pull access denied"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// isLoopback reports whether host names this machine's loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// bindLoopback publishes the container's port on 127.0.0.1 only.
func bindLoopback(hc *container.HostConfig) {
	p := network.MustParsePort(containerPort)
	hc.PortBindings = network.PortMap{p: {{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}}}
}

// banner starts the first line DynamoDB Local prints, before it listens.
const banner = "Initializing DynamoDB Local"

// waitContainerReady waits until DynamoDB Local in ctr answers HTTP at
// addr (the Docker host's address and the mapped port), polling. It gives
// up with an *[Error]
//   - "container failed" when the container stops running (with its exit
//     code and last line of output) or ctx ends;
//   - "host unreachable" when addr never accepted a TCP connection and
//     DynamoDB Local printed its banner more than reach ago: it runs, but
//     not where the tests look for it. (With Docker's userland proxy the
//     mapped port accepts as soon as the container runs; without it, once
//     DynamoDB Local listens, about two seconds after the banner.)
func waitContainerReady(ctx context.Context, ctr testcontainers.Container, addr string, reach time.Duration) error {
	endpoint := "http://" + addr
	hc := &http.Client{Timeout: time.Second}
	dialer := net.Dialer{Timeout: time.Second}
	var (
		accepted bool      // addr accepted a TCP connection once
		started  time.Time // when the banner was first seen
		lastErr  error     // of the last dial
	)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if answers(ctx, hc, endpoint) {
			return nil
		}
		if st, err := ctr.State(ctx); err == nil && !st.Running {
			return &Error{Reason: ddblocal.ReasonContainerFailed,
				Err: fmt.Errorf("exited before answering (exit code %d): %s", st.ExitCode, lastLogLine(ctr))}
		}
		if !accepted {
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if accepted = err == nil; accepted {
				conn.Close()
			} else {
				lastErr = err
			}
		}
		if !accepted {
			if started.IsZero() && strings.Contains(containerLogs(ctr), banner) {
				started = time.Now()
			}
			if !started.IsZero() && time.Since(started) > reach {
				return &Error{Reason: ddblocal.ReasonHostUnreachable,
					Err:  fmt.Errorf("DynamoDB Local runs in the container, but %s does not reach it after %v: %w", addr, reach, lastErr),
					Hint: "set TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 when the Docker daemon runs on this machine"}
			}
		}
		select {
		case <-ctx.Done():
			return &Error{Reason: ddblocal.ReasonContainerFailed, Err: fmt.Errorf("no answer from %s: %w", endpoint, ctx.Err())}
		case <-t.C:
		}
	}
}

// answers reports whether an HTTP server answers at endpoint (DynamoDB
// Local answers a bare GET with 400).
func answers(ctx context.Context, hc *http.Client, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// containerLogs returns the container's output so far (at most 1 MiB), or
// "" when it cannot be read.
func containerLogs(ctr testcontainers.Container) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return string(b)
}

// lastLogLine returns the container's last line of output, for errors.
func lastLogLine(ctr testcontainers.Container) string {
	out := strings.TrimSpace(containerLogs(ctr))
	if out == "" {
		return "no output"
	}
	return strings.TrimSpace(out[strings.LastIndexByte(out, '\n')+1:])
}
