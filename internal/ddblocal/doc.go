// Package ddblocal runs DynamoDB Local for tests and demo programs. It is a
// harness, not API.
//
// # Where the endpoint comes from
//
// [Start] resolves an endpoint in this order:
//
//  1. $ZAEL_DYNAMODB_ENDPOINT, when set: it is used as is and nothing is
//     started.
//  2. A DynamoDB Local container through testcontainers-go, when a Docker
//     daemon answers a health check (bounded by a short timeout, so a machine
//     without Docker falls through at once).
//  3. The DynamoDB Local jar, started with java from the cache directory that
//     `make dynamodb-local` fills: $ZAEL_DYNAMODB_LOCAL_DIR, or
//     .cache/dynamodb-local under the repository root (the nearest directory
//     up from the working directory that holds go.mod). It runs in memory on a
//     free loopback port and is killed by [Server.Close].
//
// When none works, [Start] returns an error that matches [ErrUnavailable].
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
// done. When no DynamoDB Local can be had, [Client] skips the test with a
// message naming the command to run (`make dynamodb-local`), except when
// CI=true or ZAEL_REQUIRE_DYNAMODB=1, where it fails the test instead.
//
// A [Recorder] attached to a client records every call (operation, batch
// size, error code, consumed capacity) for cost assertions; [WithFault]
// injects errors such as throttling before an attempt is sent.
package ddblocal
