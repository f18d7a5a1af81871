package main

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/motoserver"
)

// writeTestZip writes a Lambda zip holding a "bootstrap" file.
func writeTestZip(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, err := w.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
	require.NoError(t, err)
	fmt.Fprintf(f, "#!/bin/sh\necho %s\n", rand.Text())
	require.NoError(t, w.Close())
	path := filepath.Join(t.TempDir(), "aggregator.zip")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestDeployStatusDelete runs the stack commands against moto's server:
// deploy reaches CREATE_COMPLETE with the table of schema.go, the aggregator
// function and its event source mapping, writes the version record; data
// commands work on the deployed table; status reports the stack; delete
// removes it all.
func TestDeployStatusDelete(t *testing.T) {
	cfg := motoserver.Config(t)
	ep := *cfg.BaseEndpoint
	name := fmt.Sprintf("zl-cli-%x", []byte(rand.Text()[:6])) // lower case: bucket names derive from it
	// The long flag names, as docs/deploy.md writes them.
	common := []string{"--name", name, "--endpoint-url", ep, "--region", motoserver.Region}
	cli := func(args ...string) (int, string, string) { return runCLI(append(args, common...)...) }
	fail := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		return checkFailure(t, args, code, out, errs, exitError)
	}
	ctx := t.Context()

	// moto resolves the exports of conditional outputs whatever the
	// condition, so its deployments create the optional roles (see infra).
	code, out, errs := cli("deploy", "--lambda-zip", writeTestZip(t), "--create-iam-roles")
	require.Equal(t, exitOK, code, "deploy: stderr %q, stdout %q", errs, out)
	t.Cleanup(func() { runCLI(append([]string{"delete", "--yes"}, common...)...) })
	t.Logf("deploy output:\n%s", out)
	contains(t, out, "Deploying stack: "+name, "Stack "+name+": CREATE_COMPLETE", "Outputs:", "Version record written")

	// The table is schema.go's.
	ddb := dynamodb.NewFromConfig(cfg)
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err, "DescribeTable")
	want := limiter.TableDefinition(name)
	got := desc.Table
	assert.Len(t, got.GlobalSecondaryIndexes, len(want.GlobalSecondaryIndexes), "deployed table: GSIs")
	assert.Len(t, got.LocalSecondaryIndexes, len(want.LocalSecondaryIndexes), "deployed table: LSIs")
	assert.Len(t, got.AttributeDefinitions, len(want.AttributeDefinitions), "deployed table: attributes")
	if assert.NotNil(t, got.StreamSpecification, "deployed table: stream") {
		assert.Equal(t, want.StreamSpecification.StreamViewType, got.StreamSpecification.StreamViewType, "deployed table: stream")
	}
	// The aggregator and its trigger.
	lam := lambda.NewFromConfig(cfg)
	fn, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name + "-aggregator")})
	require.NoError(t, err, "GetFunction")
	assert.Equal(t, lambdatypes.RuntimeProvidedal2023, fn.Configuration.Runtime, "aggregator runtime")
	assert.Equal(t, "bootstrap", aws.ToString(fn.Configuration.Handler), "aggregator handler")
	esms, err := lam.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{EventSourceArn: desc.Table.LatestStreamArn})
	require.NoError(t, err)
	assert.Len(t, esms.EventSourceMappings, 1, "event source mappings on the table's stream")
	// The version record, and the deployed table serves the data commands.
	var ver versionReport
	code, out, errs = cli("version", "-o", "json")
	require.Equal(t, exitOK, code, "version: stderr %q", errs)
	require.NoError(t, json.Unmarshal([]byte(out), &ver), "version: %q", out)
	assert.True(t, ver.Initialized, "version record after deploy")
	assert.Equal(t, limiter.SchemaVersion, ver.InfraSchema, "version record after deploy")
	assert.Equal(t, "cli:"+clientVersion(), ver.UpdatedBy, "version record after deploy")
	assert.True(t, ver.Compatible, "version record after deploy")
	code, _, errs = cli("entity", "create", "key-1")
	require.Equal(t, exitOK, code, "entity create on the deployed table: stderr %q", errs)
	code, out, _ = cli("entity", "show", "key-1")
	assert.Equal(t, exitOK, code, "entity show on the deployed table")
	assert.Contains(t, out, "key-1", "entity show on the deployed table")
	// Audit events name the caller (STS GetCallerIdentity, moto's default
	// user), or $ZAEL_PRINCIPAL.
	t.Setenv(envPrincipal, "ops-team")
	code, _, errs = cli("limits", "set", "-e", "key-1", "-l", "rpm:5")
	require.Equal(t, exitOK, code, "limits set: stderr %q", errs)
	var audit struct {
		Events []auditEventJSON `json:"events"`
	}
	code, out, errs = cli("audit", "list", "-e", "key-1", "-o", "json")
	require.Equal(t, exitOK, code, "audit list: stderr %q", errs)
	require.NoError(t, json.Unmarshal([]byte(out), &audit), "audit list: %q", out)
	require.Len(t, audit.Events, 2, "audit events")
	assert.Equal(t, "ops-team", audit.Events[0].Principal, "audit principal ($ZAEL_PRINCIPAL)")
	assert.Equal(t, "arn:aws:sts::123456789012:user/moto", audit.Events[1].Principal, "audit principal (moto's caller ARN)")

	// status
	var st stackJSON
	code, out, errs = cli("status", "-o", "json")
	require.Equal(t, exitOK, code, "status: stderr %q", errs)
	require.NoError(t, json.Unmarshal([]byte(out), &st), "status: %q", out)
	assert.Equal(t, name, st.Name, "status -o json")
	assert.Equal(t, "CREATE_COMPLETE", st.Status, "status -o json")
	assert.Equal(t, aws.ToString(desc.Table.LatestStreamArn), st.Outputs["StreamArn"], "status -o json")
	// A second deploy updates in place.
	code, out, errs = cli("deploy", "--lambda-zip", writeTestZip(t), "--create-iam-roles")
	require.Equal(t, exitOK, code, "second deploy: stderr %q, stdout %q", errs, out)

	// delete
	contains(t, fail("delete"), "without --yes")
	code, out, errs = cli("delete", "--yes")
	require.Equal(t, exitOK, code, "delete: stderr %q, stdout %q", errs, out)
	contains(t, fail("status"), fmt.Sprintf("stack %q not found", name))
	var rnf *ddbtypes.ResourceNotFoundException
	_, err = ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	assert.ErrorAs(t, err, &rnf, "DescribeTable after delete")
	var fnf *lambdatypes.ResourceNotFoundException
	_, err = lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name + "-aggregator")})
	assert.ErrorAs(t, err, &fnf, "GetFunction after delete")
	// A data command on the deleted table says how to deploy it (moto is
	// on a loopback address, so local up is named first).
	contains(t, fail("entity", "show", "key-1"), fmt.Sprintf("table %q not found at ", name), fmt.Sprintf("on LocalStack: zae-limiter deploy --name %s)", name))
}
