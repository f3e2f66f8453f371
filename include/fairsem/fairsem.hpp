#pragma once

// The whole public API of fairsem.

#include "fairsem/client.hpp"
#include "fairsem/connection_options.hpp"
#include "fairsem/errors.hpp"
#include "fairsem/metrics.hpp"
#include "fairsem/semaphore.hpp"
#include "fairsem/semaphore_lock.hpp"
#include "fairsem/server_info.hpp"
#include "fairsem/version.hpp"
