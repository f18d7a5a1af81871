package infra

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// codeObject is an uploaded aggregator zip.
type codeObject struct {
	bucket, key string
	sha256      string // base64, as Lambda reports CodeSha256
}

// checkZip reports whether b is a zip with a `bootstrap` file at its root,
// the entry point of a provided.al2023 function.
func checkZip(b []byte) error {
	r, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return fmt.Errorf("%w: lambdaZip: not a zip archive: %w", ErrInvalidOptions, err)
	}
	for _, f := range r.File {
		if f.Name == "bootstrap" {
			return nil
		}
	}
	return fmt.Errorf("%w: lambdaZip: no bootstrap at the archive's root (build it with make lambda)", ErrInvalidOptions)
}

// uploadCode puts zipBytes into the artifacts bucket under
// {stack}/{kind}-{sha256}.zip (kind: aggregator or provisioner), unless an
// object of that name is there.
func (d *Deployer) uploadCode(ctx context.Context, stackName, kind string, zipBytes []byte) (*codeObject, error) {
	if err := checkZip(zipBytes); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(zipBytes)
	bucket, err := d.artifactBucket(ctx)
	if err != nil {
		return nil, err
	}
	c := &codeObject{
		bucket: bucket,
		key:    stackName + "/" + kind + "-" + hex.EncodeToString(sum[:]) + ".zip",
		sha256: base64.StdEncoding.EncodeToString(sum[:]),
	}
	_, err = d.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.key)})
	if err == nil {
		return c, nil
	}
	if !isS3NotFound(err) {
		return nil, fmt.Errorf("infra: upload %s code to s3://%s/%s: %w", kind, c.bucket, c.key, err)
	}
	if _, err := d.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(c.bucket),
		Key:         aws.String(c.key),
		Body:        bytes.NewReader(zipBytes),
		ContentType: aws.String("application/zip"),
	}); err != nil {
		return nil, fmt.Errorf("infra: upload %s code to s3://%s/%s: %w", kind, c.bucket, c.key, err)
	}
	return c, nil
}

// artifactBucket returns the artifacts bucket, creating the default one
// when it does not exist.
func (d *Deployer) artifactBucket(ctx context.Context) (string, error) {
	if d.opts.ArtifactBucket != "" {
		return d.opts.ArtifactBucket, nil
	}
	id, err := d.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("infra: artifacts bucket: account id: %w", err)
	}
	region := d.cfg.Region
	bucket := "zae-limiter-artifacts-" + aws.ToString(id.Account) + "-" + region
	_, err = d.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		return bucket, nil
	}
	if !isS3NotFound(err) {
		return "", fmt.Errorf("infra: artifacts bucket %s: %w", bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	if _, err := d.s3.CreateBucket(ctx, in); err != nil {
		var owned *s3types.BucketAlreadyOwnedByYou
		if !errors.As(err, &owned) {
			return "", fmt.Errorf("infra: create artifacts bucket %s: %w", bucket, err)
		}
	}
	if _, err := d.s3.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket: aws.String(bucket),
		PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
			BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true),
			IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true),
		},
	}); err != nil {
		return "", fmt.Errorf("infra: artifacts bucket %s: block public access: %w", bucket, err)
	}
	return bucket, nil
}

// ensureCode makes the function run code: CloudFormation has normally done
// it (the S3 key changes with the zip); otherwise, e.g. after the code was
// changed outside the stack, UpdateFunctionCode points it at the zip again.
func (d *Deployer) ensureCode(ctx context.Context, function string, code *codeObject) error {
	out, err := d.lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(function)})
	if err != nil {
		return fmt.Errorf("infra: code of %s: %w", function, err)
	}
	if aws.ToString(out.CodeSha256) == code.sha256 {
		return nil
	}
	if _, err := d.lambda.UpdateFunctionCode(ctx, &lambda.UpdateFunctionCodeInput{
		FunctionName:  aws.String(function),
		S3Bucket:      aws.String(code.bucket),
		S3Key:         aws.String(code.key),
		Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureArm64},
	}); err != nil {
		return fmt.Errorf("infra: update code of %s: %w", function, err)
	}
	for {
		cfg, err := d.lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(function)})
		if err != nil {
			return fmt.Errorf("infra: update code of %s: %w", function, err)
		}
		switch cfg.LastUpdateStatus {
		case lambdatypes.LastUpdateStatusFailed:
			return fmt.Errorf("infra: update code of %s: %s: %s", function, cfg.LastUpdateStatusReasonCode, aws.ToString(cfg.LastUpdateStatusReason))
		case lambdatypes.LastUpdateStatusInProgress:
		default:
			return nil
		}
		t := time.NewTimer(d.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("infra: update code of %s: %w", function, ctx.Err())
		case <-t.C:
		}
	}
}

// removeArtifacts deletes the stack's objects in the artifacts bucket under
// prefix ({stack}/{kind}-) but keep. A missing bucket is not an error.
func (d *Deployer) removeArtifacts(ctx context.Context, bucket, prefix, keep string) error {
	err := d.deleteObjects(ctx, bucket, prefix, func(key string) bool { return key != keep })
	if isS3NotFound(err) {
		return nil
	}
	return err
}

// emptyBucket deletes every object under prefix.
func (d *Deployer) emptyBucket(ctx context.Context, bucket, prefix string) error {
	err := d.deleteObjects(ctx, bucket, prefix, func(string) bool { return true })
	if isS3NotFound(err) {
		return nil
	}
	return err
}

func (d *Deployer) deleteObjects(ctx context.Context, bucket, prefix string, del func(key string) bool) error {
	p := s3.NewListObjectsV2Paginator(d.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []s3types.ObjectIdentifier
		for _, o := range page.Contents {
			if del(aws.ToString(o.Key)) {
				ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
			}
		}
		if len(ids) == 0 {
			continue
		}
		out, err := d.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket),
			Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete s3://%s/%s: %s: %s", bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	return nil
}

// isS3NotFound recognises a missing bucket or object (HeadObject and
// HeadBucket answer a bare 404 "NotFound").
func isS3NotFound(err error) bool {
	if err == nil {
		return false
	}
	var nf *s3types.NotFound
	var nb *s3types.NoSuchBucket
	var nk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nb) || errors.As(err, &nk) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.Contains(ae.ErrorCode(), "NotFound")
}
