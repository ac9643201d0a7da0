//! `autoforge serve`: webhook ingress into the durable inbox, the dispatcher and the poller (SPEC §14).
