// Package ddblocal runs DynamoDB Local for tests and demo programs. It is a
// harness, not API.
//
// # Where the endpoint comes from
//
// [Start] resolves an endpoint in this order:
//
//  1. $ZAEL_DYNAMODB_ENDPOINT, when set: it is used as is and nothing is
//     started.
//  2. A DynamoDB Local container ([ContainerImage]) through
//     testcontainers-go, when a Docker daemon answers a health check within
//     half a second. testcontainers-go lives in a module of its own,
//     internal/ddblocal/container, so that it and the Docker client stay
//     out of this module's dependencies: its program, the helper, is built
//     by `make ddblocal-container` (`make test` does it) into
//     .cache/bin/ddblocal-container, or named by
//     $ZAEL_DYNAMODB_CONTAINER_HELPER. The harness runs the helper, which
//     starts the container and writes its endpoint; [Server.Close] closes
//     the helper's input, and the helper terminates the container (as it
//     does when the test binary dies). The image is pulled when the daemon
//     lacks it, or built offline by `make docker-image`. The container runs
//     on the daemon's default bridge; when testcontainers names a loopback
//     address for the Docker host, its port is published on 127.0.0.1 only.
//  3. The DynamoDB Local jar, started with java from the cache directory that
//     `make dynamodb-local` fills: $ZAEL_DYNAMODB_LOCAL_DIR, or
//     .cache/dynamodb-local under the repository root (the nearest directory
//     up from the working directory that holds go.mod). It runs in memory on a
//     free loopback port and is killed by [Server.Close].
//
// $ZAEL_DYNAMODB_SOURCE=testcontainers or =java keeps to one of the last
// two, with no fallback. When none works, [Start] returns an error that
// matches [ErrUnavailable].
//
// # When the container cannot start
//
// When no container can be had, [Start] falls back to the jar within
// seconds, and [Server.Fallback] says why in one line, starting with one of
// the Reason constants: [ReasonNoHelper] (the helper is not built),
// [ReasonNoImage] or [ReasonPullRefused]
// (the image is not on the Docker host and cannot be pulled: run `make
// docker-image`; a pull that progresses may take as long as it needs, one
// that stalls is given up after 10 s), [ReasonHostUnreachable] (the
// container runs but its port does not answer at the address testcontainers
// gives for the Docker host: set TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 when
// the daemon runs on this machine), [ReasonContainerFailed] (it exited, with
// its exit code and last line of output), or [ReasonNoDocker]. Ryuk,
// testcontainers' reaper, is an image of its own: where it cannot be
// pulled, set TESTCONTAINERS_RYUK_DISABLED=true (the harness terminates its
// containers itself). The harness sets neither variable; `make test-docker`
// does, unless they are set.
//
// # Tests
//
// A package whose tests talk to DynamoDB declares
//
//	func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
//
// and calls [Client] in each test that needs a client, with [TableName] for a
// table of its own. The first [Client] call in a test binary starts one
// DynamoDB Local for the whole package; [Main] stops it when the tests are
// done. With -v the package logs where the endpoint came from (and, after a
// fallback, why). When no DynamoDB Local can be had, [Client] skips the test
// with a message naming the command to run (`make dynamodb-local`), except
// when CI=true or ZAEL_REQUIRE_DYNAMODB=1, where it fails the test instead.
//
// A [Recorder] attached to a client records every call (operation, batch
// size, error code, consumed capacity) for cost assertions; [WithFault]
// injects errors such as throttling before an attempt is sent.
//
// # Tables created one after another slow down
//
// One server's writes grow slower with every table created on it after
// others were written to: DynamoDB Local keeps the stream records of every
// table in one SQLite table (the limiter's tables have a stream), drops
// them only after 24 hours (a deleted table's too), and on each write to a
// table with a stream looks up the oldest record of that table's stream
// with a scan that passes every record written before the table's first.
// Measured on 2 cores at c=1 (machine loaded): about 2 ms more per write
// for every 10,000 records written before the table (p50 1.3, 3, 5 and
// 7 ms on four tables written in turn, 10,000 writes each; flat without
// streams). A run that measures one table after another (a benchmark's
// rounds) wants a server per table; tests pay it as their package's
// tables accumulate.
package ddblocal
