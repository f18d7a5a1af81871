package ddblocal

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
)

// ImageCommand is the command that builds [ContainerImage] offline, from
// the jar [FetchCommand] fetched and the machine's Java runtime.
const ImageCommand = "make docker-image"

// Why the testcontainers path gave up, at the start of its error; [Start]
// then tries the jar.
const (
	// ReasonNoDocker: no Docker daemon answered within a short timeout.
	ReasonNoDocker = "no docker"
	// ReasonNoImage: the image is not on the Docker host and its registry
	// has no such image.
	ReasonNoImage = "no image"
	// ReasonPullRefused: the image is not on the Docker host and pulling
	// it failed: the registry was unreachable, refused, or stalled.
	ReasonPullRefused = "pull refused"
	// ReasonHostUnreachable: the container runs, but its port did not
	// answer at the address testcontainers gives for the Docker host.
	ReasonHostUnreachable = "host unreachable"
	// ReasonContainerFailed: the container could not be created or
	// started, or it exited before DynamoDB Local answered.
	ReasonContainerFailed = "container failed"
)

// Bounds of the testcontainers path; dockerCheckTimeout (server.go) bounds
// the first question, whether a Docker daemon answers.
const (
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
	// pidLabel labels each container with the process ID of the test
	// binary that started it.
	pidLabel = "io.github.zaelimiter.ddblocal.pid"
)

// containerError says in one line why the testcontainers path gave up: a
// reason (one of the Reason constants), the cause, and what to do.
type containerError struct {
	reason string
	err    error
	hint   string // may be empty
}

func (e *containerError) Error() string {
	s := e.reason + ": " + oneLine(e.err.Error())
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

func (e *containerError) Unwrap() error { return e.err }

// oneLine joins the lines of s with "; ".
func oneLine(s string) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// containerConfig is what startContainer runs and how long it waits.
type containerConfig struct {
	image        string
	args         []string      // after "java -jar DynamoDBLocal.jar"
	stallTimeout time.Duration // see pullStallTimeout
	reachTimeout time.Duration // see reachTimeout
}

func defaultContainerConfig() containerConfig {
	return containerConfig{
		image:        ContainerImage,
		args:         []string{"-inMemory", "-sharedDb", "-disableTelemetry"},
		stallTimeout: pullStallTimeout,
		reachTimeout: reachTimeout,
	}
}

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

// startContainer runs cfg.image in memory on the Docker host's default
// bridge and waits until it answers. Close terminates the container. Every
// error is a *containerError; none takes more than a few seconds unless an
// image download is making progress or DynamoDB Local itself is slow to
// start.
func startContainer(ctx context.Context, cfg containerConfig) (*Server, error) {
	begin := time.Now()
	p, err := dockerProvider(ctx, dockerCheckTimeout)
	if err != nil {
		return nil, &containerError{reason: ReasonNoDocker,
			err: fmt.Errorf("none answers at DOCKER_HOST or the default or rootless sockets: %w", err)}
	}
	defer p.Close()
	if err := ensureImage(ctx, p.Client(), cfg.image, cfg.stallTimeout, "run `"+ImageCommand+"`"); err != nil {
		return nil, err
	}
	if !testcontainers.ReadConfig().Config.RyukDisabled {
		// Ryuk, the reaper container testcontainers starts first, would be
		// pulled with retries for minutes.
		//lint:ignore SA1019 the reaper's image is exported only under this name
		ryuk := testcontainers.ReaperDefaultImage
		if err := ensureImage(ctx, p.Client(), ryuk, cfg.stallTimeout, "set TESTCONTAINERS_RYUK_DISABLED=true"); err != nil {
			return nil, err
		}
	}
	host, err := p.DaemonHost(ctx)
	if err != nil {
		return nil, &containerError{reason: ReasonContainerFailed, err: fmt.Errorf("docker host address: %w", err)}
	}
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithCmdArgs(cfg.args...),
		testcontainers.WithLabels(map[string]string{pidLabel: strconv.Itoa(os.Getpid())}),
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
	ctr, err := tcdynamodb.Run(ctx, cfg.image, opts...)
	stop := func() error {
		if ctr == nil {
			return nil
		}
		return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(containerStopTimeout))
	}
	fail := func(reason string, err error, hint string) (*Server, error) {
		_ = stop()
		return nil, &containerError{reason: reason, err: err, hint: hint}
	}
	if err != nil {
		return fail(ReasonContainerFailed, err, "")
	}
	port, err := ctr.MappedPort(ctx, containerPort)
	if err != nil {
		return fail(ReasonContainerFailed, fmt.Errorf("mapped port: %w", err), "")
	}
	addr := net.JoinHostPort(host, port.Port())
	if err := waitContainerReady(ctx, ctr, addr, cfg.reachTimeout); err != nil {
		var ce *containerError
		if errors.As(err, &ce) {
			return fail(ce.reason, ce.err, ce.hint)
		}
		return fail(ReasonContainerFailed, err, "")
	}
	endpoint := "http://" + addr
	return &Server{endpoint: endpoint, source: SourceContainer, started: time.Since(begin), stop: stop}, nil
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
		return &containerError{reason: ReasonContainerFailed, err: fmt.Errorf("inspect %s: %w", image, err)}
	}
	if err := pullImage(ctx, cli, image, stall); err != nil {
		reason := ReasonPullRefused
		if cerrdefs.IsNotFound(err) || looksNotFound(err) {
			reason = ReasonNoImage
		}
		return &containerError{reason: reason, err: fmt.Errorf("%s is not on the Docker host; pull: %w", image, err), hint: hint}
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
// up with a *containerError
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
	t := time.NewTicker(4 * pollInterval)
	defer t.Stop()
	for {
		if answers(ctx, hc, endpoint) {
			return nil
		}
		if st, err := ctr.State(ctx); err == nil && !st.Running {
			return &containerError{reason: ReasonContainerFailed,
				err: fmt.Errorf("%w (exit code %d): %s", errExited, st.ExitCode, lastLogLine(ctr))}
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
				return &containerError{reason: ReasonHostUnreachable,
					err:  fmt.Errorf("DynamoDB Local runs in the container, but %s does not reach it after %v: %w", addr, reach, lastErr),
					hint: "set TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 when the Docker daemon runs on this machine"}
			}
		}
		select {
		case <-ctx.Done():
			return &containerError{reason: ReasonContainerFailed, err: fmt.Errorf("no answer from %s: %w", endpoint, ctx.Err())}
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
