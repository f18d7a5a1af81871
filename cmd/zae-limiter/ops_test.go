package main

import (
	"archive/zip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra"
	"github.com/zaelimiter/limiter/internal/motoserver"
)

func zipSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// TestListUpgradeOnMoto deploys a stack with the provisioner on moto, lists
// it next to a stack carrying the original's tags, upgrades it after a
// version bump (new code for both functions, tags, version record), with
// --lambda-only, and refuses a table whose schema needs a migration.
func TestListUpgradeOnMoto(t *testing.T) {
	cfg := motoserver.Config(t)
	ep := *cfg.BaseEndpoint
	name := fmt.Sprintf("zl-ops-%x", []byte(rand.Text()[:6]))
	common := []string{"--name", name, "--endpoint-url", ep, "--region", motoserver.Region}
	cli := func(args ...string) (int, string, string) { return runCLI(append(args, common...)...) }
	ok := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		require.Equal(t, 0, code, "zae-limiter %v: %s %s", args, errs, out)
		return out
	}
	ctx := t.Context()

	aggr1, prov1 := writeTestZip(t), writeTestZip(t)
	ok("deploy", "--lambda-zip", aggr1, "--enable-provisioner", "--provisioner-zip", prov1, "--create-iam-roles")
	t.Cleanup(func() { runCLI(append([]string{"delete", "--yes"}, common...)...) })
	var st stackJSON
	require.NoError(t, json.Unmarshal([]byte(ok("status", "-o", "json")), &st))
	assert.NotEmpty(t, st.Outputs["ProvisionerArn"])
	lam := lambda.NewFromConfig(cfg)
	codeOf := func(fn string) string {
		out, err := lam.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
		require.NoError(t, err)
		return aws.ToString(out.CodeSha256)
	}
	assert.Equal(t, zipSHA(t, prov1), codeOf(name+"-limits-provisioner"))

	// list: this stack, and one the original deployed (its tags, any
	// template), but not an unrelated stack.
	cf := cloudformation.NewFromConfig(cfg)
	tpl := `{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}`
	orig, other := name+"-py", name+"-other"
	_, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(orig), TemplateBody: aws.String(tpl), Tags: []cfntypes.Tag{
		{Key: aws.String("ManagedBy"), Value: aws.String("zae-limiter")}, {Key: aws.String("zae-limiter:name"), Value: aws.String(orig)},
		{Key: aws.String("zae-limiter:type"), Value: aws.String("limiter")}, {Key: aws.String("zae-limiter:version"), Value: aws.String("0.10.3")},
		{Key: aws.String("zae-limiter:schema-version"), Value: aws.String("0.10.0")},
	}})
	require.NoError(t, err)
	_, err = cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(other), TemplateBody: aws.String(tpl)})
	require.NoError(t, err)
	var listed struct {
		Region string        `json:"region"`
		Stacks []listedStack `json:"stacks"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok("list", "-o", "json")), &listed))
	byName := map[string]listedStack{}
	for _, s := range listed.Stacks {
		byName[s.Name] = s
	}
	assert.Equal(t, motoserver.Region, listed.Region)
	assert.Equal(t, clientVersion(), byName[name].Version)
	assert.Equal(t, "0.10.3", byName[orig].Version, "the original's stack")
	assert.NotContains(t, byName, other)
	contains(t, ok("list"), "NAME", name, orig, "0.10.3")

	// upgrade at the same version changes nothing.
	contains(t, ok("upgrade"), "already")

	// A version bump: new code for both functions, tags, record.
	prev := infra.Version
	infra.Version = "go-99.0.0"
	t.Cleanup(func() { infra.Version = prev })
	aggr2, prov2 := writeTestZip(t), writeTestZip(t)
	var up upgradeJSON
	require.NoError(t, json.Unmarshal([]byte(ok("upgrade", "--lambda-zip", aggr2, "--provisioner-zip", prov2, "-o", "json")), &up))
	assert.True(t, up.Upgraded)
	assert.Equal(t, prev, up.FromVersion)
	assert.Equal(t, "go-99.0.0", up.ToVersion)
	assert.Equal(t, zipSHA(t, aggr2), codeOf(name+"-aggregator"))
	assert.Equal(t, zipSHA(t, prov2), codeOf(name+"-limits-provisioner"))
	var ver versionReport
	require.NoError(t, json.Unmarshal([]byte(ok("version", "-o", "json")), &ver))
	assert.Equal(t, "cli:go-99.0.0", ver.UpdatedBy)
	assert.Empty(t, ver.LambdaVersion, "the record's lambda_version stays empty (the original's clients read it)")
	require.NoError(t, json.Unmarshal([]byte(ok("status", "-o", "json")), &st))
	desc, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	require.NoError(t, err)
	tags := map[string]string{}
	for _, tg := range desc.Stacks[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	assert.Equal(t, map[string]string{"ManagedBy": "zae-limiter", "zae-limiter:name": name, "zae-limiter:type": "limiter",
		"zae-limiter:version": "go-99.0.0", "zae-limiter:lambda-version": "go-99.0.0", "zae-limiter:schema-version": limiter.SchemaVersion}, tags)
	contains(t, ok("upgrade"), "already")

	// --lambda-only --force: the code only.
	aggr3 := writeTestZip(t)
	contains(t, ok("upgrade", "--lambda-only", "--force", "--lambda-zip", aggr3, "--provisioner-zip", prov2), "upgraded")
	assert.Equal(t, zipSHA(t, aggr3), codeOf(name+"-aggregator"))

	// A table of another schema major version: refused, exit 2, one line.
	repo, err := limiter.OpenDynamoDB(ctx, dynamodb.NewFromConfig(cfg), func(o *limiter.DynamoDBOptions) { o.Table = name })
	require.NoError(t, err)
	require.NoError(t, repo.SetVersionRecord(ctx, limiter.VersionRecord{SchemaVersion: "1.0.0", ClientMinVersion: "0.0.0"}))
	code, out, errs := cli("upgrade", "--force", "--lambda-zip", aggr3, "--provisioner-zip", prov2)
	msg := checkFailure(t, []string{"upgrade"}, code, out, errs, exitError)
	assert.Contains(t, msg, "schema migration required: the table has schema 1.0.0")
	assert.Equal(t, zipSHA(t, aggr3), codeOf(name+"-aggregator"), "a refused upgrade deployed code")
}

// TestLambdaExport describes a package with --info and builds the
// provisioner's from this repository: a zip holding one executable
// `bootstrap`, a linux/arm64 ELF.
func TestLambdaExport(t *testing.T) {
	code, out, errs := runCLI("lambda-export", "--info", "--function", "provisioner")
	require.Equal(t, 0, code, errs)
	contains(t, out, "provisioner", "./infra/provisioner/cmd/provisioner", "zae-limiter-provisioner.zip")
	code, out, errs = runCLI("lambda-export", "--info")
	require.Equal(t, 0, code, errs)
	contains(t, out, "aggregator", "./aggregator/cmd/aggregator", "provided.al2023, arm64", "GOARCH=arm64")
	code, out, errs = runCLI("lambda-export", "--function", "nope")
	checkFailure(t, []string{"lambda-export"}, code, out, errs, exitError)

	if testing.Short() {
		t.Skip("cross-compiles the Lambda")
	}
	path := filepath.Join(t.TempDir(), "prov.zip")
	code, out, errs = runCLI("lambda-export", "--function", "provisioner", "--source", filepath.Join("..", ".."), "--output", path)
	require.Equal(t, 0, code, errs)
	contains(t, out, "Wrote "+path)
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	require.Len(t, zr.File, 1)
	assert.Equal(t, "bootstrap", zr.File[0].Name)
	assert.NotZero(t, zr.File[0].Mode().Perm()&0o111, "bootstrap is not executable")
	rc, err := zr.File[0].Open()
	require.NoError(t, err)
	head := make([]byte, 20)
	_, err = io.ReadFull(rc, head)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "\x7fELF", string(head[:4]))
	assert.Equal(t, byte(0xb7), head[18], "e_machine is not EM_AARCH64")

	code, out, errs = runCLI("lambda-export", "--function", "provisioner", "--source", filepath.Join("..", ".."), "--output", path)
	contains(t, checkFailure(t, []string{"lambda-export"}, code, out, errs, exitError), "--force")
}
