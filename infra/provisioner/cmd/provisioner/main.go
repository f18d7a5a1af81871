// Command provisioner is the Lambda function (provided.al2023, arm64; built
// by `make lambda` into bin/provisioner.zip) behind the CloudFormation custom
// resource Custom::ZaeLimiterLimits: it stores the limits a stack declares
// (see package provisioner) and answers CloudFormation on the event's
// ResponseURL. TABLE_NAME is the table of resources without a TableName.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter/infra/provisioner"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	h := &provisioner.Handler{Client: dynamodb.NewFromConfig(cfg), DefaultTable: os.Getenv("TABLE_NAME")}
	lambda.Start(cfn.LambdaWrap(h.Handle))
}
