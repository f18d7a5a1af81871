package ddblocal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The container path runs in a program of its own, the helper, built from
// the module in internal/ddblocal/container: testcontainers-go and the
// Docker client it needs stay out of this module's dependencies, and so out
// of every program that imports the limiter. The harness starts the helper,
// reads one line from it (the endpoint, or why there is none), and closes
// the helper's standard input to stop it; the helper then terminates its
// container. A test binary that dies closes that input too.

// ImageCommand is the command that builds [ContainerImage] offline, from
// the jar [FetchCommand] fetched and the machine's Java runtime.
const ImageCommand = "make docker-image"

// HelperCommand is the command that builds the helper program into
// .cache/bin/ddblocal-container under the repository root; `make test` and
// `make test-docker` run it first.
const HelperCommand = "make ddblocal-container"

// EnvContainerHelper names the helper program, when it is not
// .cache/bin/ddblocal-container under the repository root.
const EnvContainerHelper = "ZAEL_DYNAMODB_CONTAINER_HELPER"

// HelperLinePrefix starts the one line the helper writes to its standard
// output, before the line's JSON [HelperResult].
const HelperLinePrefix = "ddblocal-container: "

// HelperResult is what the helper reports: the endpoint of a container
// that answers, or why there is none (Reason, one of the Reason constants,
// with the error in one line and what to do).
type HelperResult struct {
	Endpoint string `json:"endpoint,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
	Hint     string `json:"hint,omitempty"`
}

// Why the testcontainers path gave up, at the start of its error; [Start]
// then tries the jar.
const (
	// ReasonNoHelper: the helper program is not built (see
	// [HelperCommand]).
	ReasonNoHelper = "no helper"
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
	// started, or it exited before DynamoDB Local answered; or the helper
	// failed.
	ReasonContainerFailed = "container failed"
)

// helperStopTimeout bounds the helper's exit after its input is closed: it
// gives its container 5 s to stop before killing it, then removes it.
const helperStopTimeout = 30 * time.Second

// containerError says in one line why the testcontainers path gave up: a
// reason (one of the Reason constants), the cause, and what to do.
type containerError struct {
	reason string
	err    error
	hint   string // may be empty
}

func (e *containerError) Error() string {
	s := e.reason + ": " + OneLine(e.err.Error())
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

func (e *containerError) Unwrap() error { return e.err }

// OneLine joins the non-blank lines of s, trimmed, with "; ".
func OneLine(s string) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// containerHelper returns the path of the helper program: $ZAEL_DYNAMODB_CONTAINER_HELPER,
// or .cache/bin/ddblocal-container under the repository root.
func containerHelper() (string, error) {
	path := os.Getenv(EnvContainerHelper)
	if path == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		root, err := repoRoot(wd)
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, ".cache", "bin", "ddblocal-container")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%s is a directory", path)
	}
	return path, nil
}

// startContainer runs the helper, which starts DynamoDB Local in a
// container, and waits for its line. Every error is a *containerError.
func startContainer(ctx context.Context) (*Server, error) {
	helper, err := containerHelper()
	if err != nil {
		return nil, &containerError{reason: ReasonNoHelper, err: err, hint: "run `" + HelperCommand + "`"}
	}
	return runHelper(ctx, helper)
}

// runHelper starts helper and waits, within ctx, for its line.
func runHelper(ctx context.Context, helper string) (*Server, error) {
	begin := time.Now()
	cmd := exec.Command(helper)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, &containerError{reason: ReasonContainerFailed, err: err}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, &containerError{reason: ReasonContainerFailed, err: err}
	}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, &containerError{reason: ReasonContainerFailed, err: fmt.Errorf("start %s: %w", helper, err)}
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		// The first line, then the rest unread until the helper exits.
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	// stop closes the helper's input and waits for it to terminate its
	// container and exit; one that does not within helperStopTimeout is
	// killed.
	stop := func() error {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("%s: %w: %s", helper, err, OneLine(stderr.String()))
			}
			return nil
		case <-time.After(helperStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("%s did not stop within %v: killed", helper, helperStopTimeout)
		}
	}
	fail := func(err error) (*Server, error) {
		_ = cmd.Process.Kill()
		<-exited
		return nil, &containerError{reason: ReasonContainerFailed, err: err}
	}
	var line string
	select {
	case line = <-lines:
	case <-ctx.Done():
		return fail(fmt.Errorf("%s wrote nothing: %w", helper, ctx.Err()))
	}
	var res HelperResult
	payload, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(HelperLinePrefix))
	if !ok || json.Unmarshal([]byte(payload), &res) != nil {
		return fail(fmt.Errorf("%s wrote %q, not a result line: %s", helper, strings.TrimSpace(line), OneLine(stderr.String())))
	}
	if res.Endpoint == "" {
		_ = stop()
		reason := res.Reason
		if reason == "" {
			reason = ReasonContainerFailed
		}
		return nil, &containerError{reason: reason, err: errors.New(res.Error), hint: res.Hint}
	}
	return &Server{endpoint: res.Endpoint, source: SourceContainer, started: time.Since(begin), stop: stop}, nil
}
