package sdk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/turnd/turnd/client"
	"github.com/turnd/turnd/client/sdk"
)

func ExamplePostChatCompletion() {
	ctx := context.Background()
	oai := openai.NewClient()
	c, _ := client.New("")
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it?")}}
	for {
		completion, err := oai.Chat.Completions.New(ctx, params)
		if err != nil {
			log.Fatal(err)
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			fmt.Println(msg.Content)
			return
		}
		reply, err := sdk.PostChatCompletion(ctx, c, "conv-42", completion, nil)
		if err != nil {
			log.Fatal(err)
		}
		params.Messages = append(params.Messages, msg.ToParam())
		params.Messages = append(params.Messages, reply.Messages...)
	}
}

func ExamplePostMessage() {
	ctx := context.Background()
	c, _ := client.New("")
	var msg anthropic.Message // as anthropic.Client.Messages.New returned it
	reply, err := sdk.PostMessage(ctx, c, "conv-42", &msg, &client.ProviderOptions{Placeholders: true})
	if err != nil {
		log.Fatal(err)
	}
	next := []anthropic.MessageParam{msg.ToParam(), reply.Messages}
	fmt.Println(len(next), reply.Placeholders, reply.FollowUp)
}
