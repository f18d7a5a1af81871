package main

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/motoserver"
)

// writeTestZip writes a Lambda zip holding a "bootstrap" file.
func writeTestZip(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, err := w.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "#!/bin/sh\necho %s\n", rand.Text())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "aggregator.zip")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
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
	if code != 0 {
		t.Fatalf("deploy: exit %d, stderr %q, stdout %q", code, errs, out)
	}
	t.Cleanup(func() { runCLI(append([]string{"delete", "--yes"}, common...)...) })
	t.Logf("deploy output:\n%s", out)
	contains(t, out, "Deploying stack: "+name, "Stack "+name+": CREATE_COMPLETE", "Outputs:", "Version record written")

	// The table is schema.go's.
	ddb := dynamodb.NewFromConfig(cfg)
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	want := limiter.TableDefinition(name)
	if got := desc.Table; len(got.GlobalSecondaryIndexes) != len(want.GlobalSecondaryIndexes) ||
		len(got.LocalSecondaryIndexes) != len(want.LocalSecondaryIndexes) ||
		len(got.AttributeDefinitions) != len(want.AttributeDefinitions) ||
		got.StreamSpecification == nil || got.StreamSpecification.StreamViewType != want.StreamSpecification.StreamViewType {
		t.Errorf("deployed table: %d GSIs, %d LSIs, %d attributes, stream %+v; want %d, %d, %d, %s",
			len(got.GlobalSecondaryIndexes), len(got.LocalSecondaryIndexes), len(got.AttributeDefinitions), got.StreamSpecification,
			len(want.GlobalSecondaryIndexes), len(want.LocalSecondaryIndexes), len(want.AttributeDefinitions), want.StreamSpecification.StreamViewType)
	}
	// The aggregator and its trigger.
	lam := lambda.NewFromConfig(cfg)
	fn, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name + "-aggregator")})
	if err != nil {
		t.Fatalf("GetFunction: %v", err)
	}
	if fn.Configuration.Runtime != lambdatypes.RuntimeProvidedal2023 || aws.ToString(fn.Configuration.Handler) != "bootstrap" {
		t.Errorf("aggregator runtime %s, handler %s; want provided.al2023, bootstrap", fn.Configuration.Runtime, aws.ToString(fn.Configuration.Handler))
	}
	esms, err := lam.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{EventSourceArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(esms.EventSourceMappings); n != 1 {
		t.Errorf("%d event source mappings on the table's stream, want 1", n)
	}
	// The version record, and the deployed table serves the data commands.
	var ver versionReport
	if code, out, errs := cli("version", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &ver) != nil {
		t.Fatalf("version: exit %d, %q, %q", code, out, errs)
	}
	if !ver.Initialized || ver.InfraSchema != limiter.SchemaVersion || ver.UpdatedBy != "cli:"+clientVersion() || !ver.Compatible {
		t.Errorf("version record after deploy = %+v", ver)
	}
	if code, _, errs := cli("entity", "create", "key-1"); code != 0 {
		t.Fatalf("entity create on the deployed table: exit %d, %q", code, errs)
	}
	if code, out, _ := cli("entity", "show", "key-1"); code != 0 || !bytes.Contains([]byte(out), []byte("key-1")) {
		t.Errorf("entity show on the deployed table: exit %d, %q", code, out)
	}
	// Audit events name the caller (STS GetCallerIdentity, moto's default
	// user), or $ZAEL_PRINCIPAL.
	t.Setenv(envPrincipal, "ops-team")
	if code, _, errs := cli("limits", "set", "-e", "key-1", "-l", "rpm:5"); code != 0 {
		t.Fatalf("limits set: exit %d, %q", code, errs)
	}
	var audit struct {
		Events []auditEventJSON `json:"events"`
	}
	if code, out, errs := cli("audit", "list", "-e", "key-1", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &audit) != nil {
		t.Fatalf("audit list: exit %d, %q, %q", code, out, errs)
	}
	if len(audit.Events) != 2 || audit.Events[0].Principal != "ops-team" ||
		audit.Events[1].Principal != "arn:aws:sts::123456789012:user/moto" {
		t.Errorf("audit principals: %+v; want ops-team (ZAEL_PRINCIPAL) and moto's caller ARN", audit.Events)
	}

	// status
	var st stackJSON
	code, out, errs = cli("status", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: exit %d, %q, %q", code, out, errs)
	}
	if st.Name != name || st.Status != "CREATE_COMPLETE" || st.Outputs["StreamArn"] != aws.ToString(desc.Table.LatestStreamArn) {
		t.Errorf("status -o json = %+v", st)
	}
	// A second deploy updates in place.
	if code, out, errs := cli("deploy", "--lambda-zip", writeTestZip(t), "--create-iam-roles"); code != 0 {
		t.Fatalf("second deploy: exit %d, %q, %q", code, out, errs)
	}

	// delete
	contains(t, fail("delete"), "without --yes")
	if code, out, errs := cli("delete", "--yes"); code != 0 {
		t.Fatalf("delete: exit %d, %q, %q", code, out, errs)
	}
	contains(t, fail("status"), fmt.Sprintf("stack %q not found", name))
	var rnf *ddbtypes.ResourceNotFoundException
	if _, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); !errors.As(err, &rnf) {
		t.Errorf("DescribeTable after delete = %v, want ResourceNotFoundException", err)
	}
	var fnf *lambdatypes.ResourceNotFoundException
	if _, err := lam.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name + "-aggregator")}); !errors.As(err, &fnf) {
		t.Errorf("GetFunction after delete = %v, want ResourceNotFoundException", err)
	}
	// A data command on the deleted table says how to deploy it (moto is
	// on a loopback address, so local up is named first).
	contains(t, fail("entity", "show", "key-1"), fmt.Sprintf("table %q not found at ", name), fmt.Sprintf("on LocalStack: zae-limiter deploy --name %s)", name))
}
