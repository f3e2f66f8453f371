#pragma once

// The implementation files of fairsem/impl/net/ (talking to a Redis server: Connection, hiredis,
// TLS, URLs and ConnectionOptions, the Router and Discovery, ServerInfo), listed once: src/net.cpp
// compiles them into libfairsem, and fairsem/impl/header_only.hpp includes them in header-only
// mode. A new implementation file of this folder is added here and nowhere else.

#include "fairsem/impl/net/connection-inl.hpp"
#include "fairsem/impl/net/connection_connect-inl.hpp"
#include "fairsem/impl/net/connection_options-inl.hpp"
#include "fairsem/impl/net/connection_redirect-inl.hpp"
#include "fairsem/impl/net/discovery-inl.hpp"
#include "fairsem/impl/net/hiredis_context-inl.hpp"
#include "fairsem/impl/net/hiredis_reply-inl.hpp"
#include "fairsem/impl/net/router-inl.hpp"
#include "fairsem/impl/net/server_info-inl.hpp"
#include "fairsem/impl/net/sigpipe_guard-inl.hpp"
#include "fairsem/impl/net/tls-inl.hpp"
#include "fairsem/impl/net/url_parser-inl.hpp"
