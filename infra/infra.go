// Package infra deploys zae-limiter into an AWS account: an embedded
// CloudFormation template (the DynamoDB table of [limiter.TableDefinition],
// its stream, the aggregator Lambda with its event source mapping, IAM
// policies and roles, the audit archive bucket, a DLQ and alarms) and a
// [Deployer] that creates, updates, describes and deletes the stack.
//
// # The aggregator's code
//
// The aggregator runs on provided.al2023 (arm64, a `bootstrap` binary, built
// by `make lambda`), and CloudFormation takes code for that runtime only
// from S3. [Deployer.Deploy] uploads the zip to an artifacts bucket outside
// the stack ([DeployerOptions.ArtifactBucket], by default
// zae-limiter-artifacts-{account}-{region}, created on first use) under a
// key named after the zip's SHA-256, and passes bucket and key as the
// template parameters AggregatorCodeS3Bucket and AggregatorCodeS3Key. New
// code therefore changes a parameter, and CloudFormation updates the
// function in the same stack operation (and restores the old code on a
// rollback). After the stack is complete Deploy checks the function's
// CodeSha256 against the zip and calls UpdateFunctionCode if they differ.
package infra

import (
	_ "embed"
	"errors"
)

// ErrStackNotFound is returned by [Deployer.Status] and [Deployer.Delete]
// when the stack does not exist.
var ErrStackNotFound = errors.New("infra: stack not found")

// ErrDeployFailed is matched (errors.Is) by a [*StackError]: a stack
// operation ended in a failed or rolled-back state.
var ErrDeployFailed = errors.New("infra: stack operation failed")

//go:embed cfn_template.yaml
var template []byte

// Template returns the embedded CloudFormation template (YAML). The caller
// may modify the returned slice; it is a copy.
func Template() []byte { return append([]byte(nil), template...) }
