package ddblocal

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcdynamodb "github.com/testcontainers/testcontainers-go/modules/dynamodb"
)

// dockerHealthy reports, within timeout, whether a Docker daemon answers.
// The first call of a process discovers the daemon the way testcontainers-go
// does (DOCKER_HOST, ~/.testcontainers.properties, the default and rootless
// sockets) and testcontainers caches the result; without a daemon this takes
// a few milliseconds.
func dockerHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Discovery under our deadline: NewDockerProvider below would run it
	// (once per process) with an unbounded context.
	if _, err := testcontainers.NewDockerClientWithOpts(ctx); err != nil {
		return err
	}
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(tclog.NewNoopLogger()))
	if err != nil {
		return err
	}
	return p.Health(ctx) // closes p
}

// startContainer runs [ContainerImage] in memory and waits until it
// answers. Close terminates the container.
func startContainer(ctx context.Context) (*Server, error) {
	begin := time.Now()
	ctr, err := tcdynamodb.Run(ctx, ContainerImage,
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithCmdArgs("-inMemory", "-sharedDb"),
		tcdynamodb.WithDisableTelemetry(),
	)
	stop := func() error {
		if ctr == nil {
			return nil
		}
		return testcontainers.TerminateContainer(ctr)
	}
	if err != nil {
		_ = stop()
		return nil, err
	}
	hostPort, err := ctr.ConnectionString(ctx)
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("container endpoint: %w", err)
	}
	endpoint := "http://" + hostPort
	if err := waitReady(ctx, endpoint, nil); err != nil {
		_ = stop()
		return nil, err
	}
	return &Server{endpoint: endpoint, source: SourceContainer, started: time.Since(begin), stop: stop}, nil
}
