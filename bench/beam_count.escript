#!/usr/bin/env escript
%% bench/beam_count.escript: BEAM's call_count on a small function, the
%% peer of bench_overhead's call_count row (issue 16). Prints
%% "off MED MIN MAX", "on MED MIN MAX" and "diff MED MIN MAX": ns per call
%% of a loop of CALLS calls to leaf/2, untraced, with
%% erlang:trace_pattern(MFA, true, [call_count]), and the difference of each
%% interleaved pair; RUNS pairs. The count is checked (exit 2 if short).
%% Usage: escript bench/beam_count.escript [CALLS RUNS]
-mode(compile).
-export([leaf/2]).

leaf(A, B) -> (A bxor B) + 1.

loop(0, Acc) -> Acc;
loop(N, Acc) -> loop(N - 1, leaf(Acc, N)).

ns_per_call(Calls) ->
    T0 = erlang:monotonic_time(nanosecond),
    _ = loop(Calls, 0),
    T1 = erlang:monotonic_time(nanosecond),
    (T1 - T0) / Calls.

stat(Xs) ->
    S = lists:sort(Xs), N = length(S),
    Med = case N rem 2 of 1 -> lists:nth((N + 1) div 2, S);
                          0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2 end,
    {Med, hd(S), lists:last(S)}.

main(Args) ->
    {Calls, Runs} = case Args of [C, R] -> {list_to_integer(C), list_to_integer(R)}; _ -> {10000000, 5} end,
    MFA = {?MODULE, leaf, 2},
    _ = ns_per_call(Calls div 10),   % warm up
    Pairs = [begin
                 erlang:trace_pattern(MFA, false, [call_count]),
                 Off = ns_per_call(Calls),
                 erlang:trace_pattern(MFA, true, [call_count]),
                 On = ns_per_call(Calls),
                 {call_count, Count} = erlang:trace_info(MFA, call_count),
                 Count >= Calls orelse halt(2),
                 {Off, On}
             end || _ <- lists:seq(1, Runs)],
    erlang:trace_pattern(MFA, false, [call_count]),
    {OffM, OffL, OffH} = stat([O || {O, _} <- Pairs]),
    {OnM, OnL, OnH} = stat([N || {_, N} <- Pairs]),
    io:format("otp ~s ~s~n", [erlang:system_info(otp_release), erlang:system_info(emu_flavor)]),
    io:format("off ~.3f ~.3f ~.3f~n", [OffM, OffL, OffH]),
    io:format("on ~.3f ~.3f ~.3f~n", [OnM, OnL, OnH]),
    {DM, DL, DH} = stat([N - O || {O, N} <- Pairs]),
    io:format("diff ~.3f ~.3f ~.3f~n", [DM, DL, DH]),
    ok.
