package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// Main is the helper program that package ddblocal runs (see
// cmd/ddblocal-container): it serves one container, labelled with the
// process ID of its parent (the test binary), until its standard input
// closes or it gets SIGINT or SIGTERM. It returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := DefaultConfig()
	cfg.OwnerPID = os.Getppid()
	return Serve(ctx, os.Stdin, os.Stdout, os.Stderr, cfg)
}

// Serve starts the container of cfg and writes one line to out:
// [ddblocal.HelperLinePrefix] and a JSON [ddblocal.HelperResult], the
// endpoint or why there is none. With a container, it then reads in until
// it ends (the harness closes it, or dies) or ctx ends, and terminates the
// container. Errors after the line go to errOut. It returns the exit code:
// 0, or 1 when the line could not be written or the container not
// terminated.
func Serve(ctx context.Context, in io.Reader, out, errOut io.Writer, cfg Config) int {
	startCtx, cancel := context.WithTimeout(ctx, ddblocal.StartTimeout)
	ctr, err := Start(startCtx, cfg)
	cancel()
	var res ddblocal.HelperResult
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			ce = &Error{Reason: ddblocal.ReasonContainerFailed, Err: err}
		}
		res = ddblocal.HelperResult{Reason: ce.Reason, Error: ddblocal.OneLine(ce.Err.Error()), Hint: ce.Hint}
	} else {
		res = ddblocal.HelperResult{Endpoint: ctr.Endpoint}
	}
	line, _ := json.Marshal(res) // strings only: never fails
	if _, werr := fmt.Fprintf(out, "%s%s\n", ddblocal.HelperLinePrefix, line); werr != nil {
		fmt.Fprintf(errOut, "ddblocal-container: write: %v\n", werr)
		if ctr != nil {
			_ = ctr.Terminate()
		}
		return 1
	}
	if ctr == nil {
		return 0
	}
	closed := make(chan struct{})
	go func() {
		// Ends when in does: at EOF, or with an error when the harness
		// dies. A helper stopped by ctx exits with this read pending.
		_, _ = io.Copy(io.Discard, in)
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	if err := ctr.Terminate(); err != nil {
		fmt.Fprintf(errOut, "ddblocal-container: terminate the container at %s: %v\n", ctr.Endpoint, err)
		return 1
	}
	return 0
}
