package ddblocal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestEndpointYouRun follows "an endpoint you run" of docs/testing.md: a
// DynamoDB Local started by hand, in the jar's directory, with the command
// line the docs give
//
//	java -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -sharedDb -port PORT
//
// is the server Start returns when ZAEL_DYNAMODB_ENDPOINT names it (as in
// `ZAEL_DYNAMODB_ENDPOINT=http://localhost:PORT make test`): nothing is
// started, and a client of it creates and lists a table there.
func TestEndpointYouRun(t *testing.T) {
	dir, err := LocalDir()
	require.NoError(t, err)
	jar, err := findJar(dir)
	if err != nil {
		unavailable(t, err, os.Getenv)
		return
	}
	java, err := javaBinary()
	if err != nil {
		unavailable(t, err, os.Getenv)
		return
	}
	port, err := freePort()
	require.NoError(t, err)
	cmd := exec.Command(java, "-Djava.library.path=DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar",
		"-inMemory", "-sharedDb", "-port", strconv.Itoa(port))
	cmd.Dir = filepath.Dir(jar)
	require.NoError(t, cmd.Start(), "start")
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	endpoint := "http://localhost:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	require.NoError(t, waitReady(ctx, endpoint, exited), "DynamoDB Local started by hand")

	t.Setenv(EnvEndpoint, endpoint)
	srv, err := Start(ctx)
	require.NoError(t, err)
	defer srv.Close()
	require.Equal(t, SourceEnv, srv.Source(), "Start with %s=%s: source %q, endpoint %q; want %q at that endpoint", EnvEndpoint, endpoint, srv.Source(), srv.Endpoint(), SourceEnv)
	require.Equal(t, normalizeEndpoint(endpoint), srv.Endpoint(), "Start with %s=%s: source %q, endpoint %q; want %q at that endpoint", EnvEndpoint, endpoint, srv.Source(), srv.Endpoint(), SourceEnv)
	client := NewClient(srv.Endpoint())
	table := TableName(t)
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	require.NoError(t, err, "CreateTable on the endpoint you run")
	out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err, "ListTables = %v; want %s", out, table)
	require.True(t, slices.Contains(out.TableNames, table), "ListTables = %v; want %s", out, table)
}
