// A push consumer of the Go client (rocketmq-client-go v2) that fails every message it is given
// (ConsumeRetryLater) with maxReconsumeTimes: for tests/interop/test_go_client.py. It prints
// "CALL <epoch ms> <body> <reconsumeTimes> <topic>" per call, and runs until SIGTERM (or
// TIMEOUT_S), when it shuts down and prints "DONE <calls>".
//
// Usage: goconsumer NAMESRV TOPIC GROUP MAX_RECONSUME TIMEOUT_S
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: goconsumer NAMESRV TOPIC GROUP MAX_RECONSUME TIMEOUT_S")
		os.Exit(2)
	}
	namesrv, topic, group := os.Args[1], os.Args[2], os.Args[3]
	maxReconsume, _ := strconv.Atoi(os.Args[4])
	timeout, _ := strconv.Atoi(os.Args[5])
	rlog.SetLogLevel("warn")
	c, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(int32(maxReconsume)),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new consumer:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	seen := 0
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context,
		msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			fmt.Printf("CALL %d %s %d %s\n", time.Now().UnixMilli(), string(m.Body),
				m.ReconsumeTimes, m.Topic)
			seen++
		}
		return consumer.ConsumeRetryLater, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "subscribe:", err)
		os.Exit(1)
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case <-time.After(time.Duration(timeout) * time.Second):
		fmt.Fprintln(os.Stderr, "timed out")
	}
	_ = c.Shutdown()
	mu.Lock()
	fmt.Printf("DONE %d\n", seen)
	mu.Unlock()
}
